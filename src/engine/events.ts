import type { z } from 'zod';
import type { ExecutionFailure } from '../executor/executor';
import { toExecutionFailure } from '../executor/failure';
import type { ErrorEvent } from '../request/omni-event';

const MAX_ISSUES = 20;
const MAX_TEXT = 300;

function clip(text: string): string {
  // eslint-disable-next-line no-control-regex
  const plain = text.replace(/[\u0000-\u001f\u007f]/g, '?');
  return plain.length > MAX_TEXT ? `${plain.slice(0, MAX_TEXT)}…` : plain;
}

/** Turns a zod failure into an `error` event: code, first field as `param`, every issue with its dotted path. */
export function validationErrorEvent(requestId: string, error: z.ZodError): ErrorEvent {
  // Bounded and printable: a hostile input with thousands of unknown keys must not produce a megabyte event, and
  // key names are echoed only as far as they are plain text.
  // An unknown key is reported at its parent; name the key itself so `param` points at the offending field.
  const pathOf = (i: z.core.$ZodIssue) => [...i.path.map(String), ...(i.code === 'unrecognized_keys' && i.keys.length > 0 ? [i.keys[0]] : [])].join('.');
  const issues = error.issues.slice(0, MAX_ISSUES).map((i) => ({ path: clip(pathOf(i)), code: i.code, message: clip(i.message) }));
  const first = issues[0];
  return {
    type: 'error',
    requestId,
    code: 'OMNIRX_ERR_INVALID_REQUEST',
    message: first ? `${first.path || '(request)'}: ${first.message}` : 'invalid request',
    param: first?.path || undefined,
    issues,
  };
}

/** An execution's failure as the request's `error` event (`completedSteps`: the loop steps it reported before failing). */
export function errorEventOf(requestId: string, f: ExecutionFailure & { completedSteps?: number }): ErrorEvent {
  const { code, message, param, node, completedSteps, partial } = f;
  return {
    type: 'error',
    requestId,
    code,
    message,
    ...(param === undefined ? {} : { param }),
    ...(node === undefined ? {} : { node }),
    ...(completedSteps === undefined ? {} : { completedSteps }),
    ...(partial === undefined ? {} : { partial }),
  };
}

/** Turns anything thrown while a request ran into an `error` event (never a thrown error on the stream). */
export function failureEvent(requestId: string, err: unknown, extra: Pick<ErrorEvent, 'node' | 'partial'> = {}): ErrorEvent {
  return errorEventOf(requestId, toExecutionFailure(err, extra));
}
