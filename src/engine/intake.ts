import { randomUUID } from 'node:crypto';
import type { Subscriber } from 'rxjs';
import type { z } from 'zod';
import { OmniError } from '../errors';
import type { OmniEvent } from '../request/omni-event';
import { failureEvent, validationErrorEvent } from './events';

/** What `takeRequest` made of an input: the validated request and its id, or the error event to answer with. */
export type Intake<R> = { ok: true; request: R; requestId: string } | { ok: false; event: OmniEvent };

/**
 * Validates one request at the door of a front end (the engine, the stage front): the caller's `requestId` if it is
 * a string (else a fresh UUID) names the request even when validation fails; a zod failure becomes a validation
 * `error` event naming the field, and an input whose getters or Proxy throw while read becomes an
 * OMNIRX_ERR_INVALID_REQUEST event — never a thrown error or a stream error. `refuse` is the front end's own door
 * check on a valid request (closed, duplicate id, queue bound): the error it returns becomes the answer.
 */
export function takeRequest<R extends { requestId?: string }>(
  schema: z.ZodType<R>,
  input: unknown,
  refuse?: (requestId: string) => OmniError | undefined,
): Intake<R> {
  let fallbackId: string = randomUUID();
  try {
    const given = (input as { requestId?: unknown } | null)?.requestId;
    if (typeof given === 'string') fallbackId = given;
  } catch {
    // a getter or Proxy in the input threw: the parse below reports it
  }
  let parsed: ReturnType<typeof schema.safeParse>;
  try {
    parsed = schema.safeParse(input);
  } catch (err) {
    return {
      ok: false,
      event: failureEvent(fallbackId, new OmniError('OMNIRX_ERR_INVALID_REQUEST', `the request could not be read: ${(err as Error)?.message ?? String(err)}`)),
    };
  }
  if (!parsed.success) return { ok: false, event: validationErrorEvent(fallbackId, parsed.error) };
  const requestId = parsed.data.requestId ?? fallbackId;
  const refusal = refuse?.(requestId);
  if (refusal !== undefined) return { ok: false, event: failureEvent(requestId, refusal) };
  return { ok: true, request: parsed.data, requestId };
}

/**
 * `takeRequest` for a cold request stream: a refused input is answered on `subscriber` (its error event, then
 * complete) and undefined is returned; an accepted one is returned for the caller to run.
 */
export function takeRequestOrAnswer<R extends { requestId?: string }>(
  subscriber: Subscriber<OmniEvent>,
  schema: z.ZodType<R>,
  input: unknown,
  refuse?: (requestId: string) => OmniError | undefined,
): Extract<Intake<R>, { ok: true }> | undefined {
  const intake = takeRequest(schema, input, refuse);
  if (intake.ok) return intake;
  subscriber.next(intake.event);
  subscriber.complete();
  return undefined;
}
