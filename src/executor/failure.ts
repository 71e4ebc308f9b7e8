import { ERROR_CATALOGUE, OmniError, withoutServerPaths, type ErrorCode } from '../errors';
import type { ExecutionFailure } from './executor';

/**
 * Anything thrown while work ran, as plain data: an OmniError keeps its code and `param`; an error whose `code` is a
 * catalogue code (a native error) keeps it; anything else is OMNIRX_ERR_INTERNAL with its message, the server's
 * absolute paths shortened (`withoutServerPaths`): the failure becomes a client's event.
 */
export function toExecutionFailure(err: unknown, extra: Pick<ExecutionFailure, 'node' | 'partial'> = {}): ExecutionFailure {
  const e = err instanceof Error ? err : new Error(String(err));
  const raw = (e as Error & { code?: unknown }).code;
  const code: ErrorCode =
    e instanceof OmniError ? e.code : typeof raw === 'string' && Object.hasOwn(ERROR_CATALOGUE, raw) ? (raw as ErrorCode) : 'OMNIRX_ERR_INTERNAL';
  const failure: ExecutionFailure = { code, message: code === 'OMNIRX_ERR_INTERNAL' ? withoutServerPaths(e.message) : e.message, ...extra };
  if (e instanceof OmniError && e.param !== undefined) failure.param = e.param;
  return failure;
}
