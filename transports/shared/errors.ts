import { ERROR_CATALOGUE, withoutServerPaths, type ErrorCode } from '../../src/errors';
import type { ErrorEvent } from '../../src/request/omni-event';

/** OpenAI-style error `type` of a response, derived from its HTTP status. */
export type HttpErrorType =
  'invalid_request_error' | 'authentication_error' | 'not_found_error' | 'conflict_error' | 'rate_limit_error' | 'server_error' | 'service_unavailable_error';

/**
 * Codes the transports themselves raise (the engine's `OMNIRX_ERR_*` codes pass through unchanged). Lower-case
 * like OpenAI's own codes so they never collide with the engine catalogue in `src/errors.ts`.
 */
export const HTTP_ERROR_CODES = {
  invalid_json: 400,
  invalid_body: 400,
  malformed_request: 400,
  unauthorized: 401,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  not_ready: 409,
  gone: 410,
  body_too_large: 413,
  uri_too_long: 414,
  unsupported_media_type: 415,
  headers_too_large: 431,
  internal: 500,
} as const;

export type HttpErrorCode = keyof typeof HTTP_ERROR_CODES;

/** The body of every error response: `{"error": {type, message, param, code}}`. */
export interface ErrorBody {
  error: { type: HttpErrorType; message: string; param: string | null; code: string };
}

/** An error that becomes an HTTP response with `status` and an {@link ErrorBody}. */
export class HttpError extends Error {
  override readonly name = 'HttpError';

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
  }

  /** An error with one of the transport's own codes (its status comes from {@link HTTP_ERROR_CODES}). */
  static of(code: HttpErrorCode, message: string, param: string | null = null): HttpError {
    return new HttpError(HTTP_ERROR_CODES[code], code, message, param);
  }

  /** An error with one of the engine's codes (its status comes from `ERROR_CATALOGUE`). */
  static engine(code: ErrorCode, message: string, param: string | null = null): HttpError {
    return new HttpError(ERROR_CATALOGUE[code].status, code, message, param);
  }

  /** The JSON body of this error. */
  body(): ErrorBody {
    return { error: { type: errorTypeOf(this.status), message: this.message, param: this.param, code: this.code } };
  }
}

/** OpenAI-style `type` for an HTTP status. */
export function errorTypeOf(status: number): HttpErrorType {
  if (status === 401) return 'authentication_error';
  if (status === 404) return 'not_found_error';
  if (status === 409) return 'conflict_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 503) return 'service_unavailable_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/**
 * Turns an engine `error` event into an {@link HttpError}: the status from the engine's catalogue (500 for a code
 * it does not know), `param` translated from the request path (`diffusion.numFrames`) to the HTTP field name by
 * `fieldOf`; a message that starts with the request path starts with the HTTP field instead (`size (diffusion.width): …`).
 */
export function fromErrorEvent(ev: ErrorEvent, fieldOf: (path: string | undefined) => string | null): HttpError {
  const known = Object.prototype.hasOwnProperty.call(ERROR_CATALOGUE, ev.code);
  const status = known ? ERROR_CATALOGUE[ev.code as ErrorCode].status : 500;
  const field = fieldOf(ev.param);
  // The engine's message starts with its request path; name the HTTP field the client sent first.
  const prefix = ev.param === undefined ? undefined : `${ev.param}:`;
  const message =
    field !== null && prefix !== undefined && field !== ev.param && ev.message.startsWith(prefix)
      ? `${field} (${ev.param}):${ev.message.slice(prefix.length)}`
      : ev.message;
  return new HttpError(status, ev.code, message, field);
}

/**
 * Turns anything a route or Fastify threw into an {@link HttpError}: our own errors as they are, Fastify's body
 * errors (malformed JSON, too large, wrong media type, multipart limits) by their status, everything else as a
 * 500 whose message says what failed, without the server's absolute paths (`withoutServerPaths`; the server's log
 * keeps the whole error).
 */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  const e = (err ?? {}) as { statusCode?: unknown; code?: unknown; message?: unknown };
  const status = typeof e.statusCode === 'number' ? e.statusCode : 500;
  const message = typeof e.message === 'string' ? e.message : String(err);
  if (status === 413) return HttpError.of('body_too_large', message);
  if (status === 415) return HttpError.of('unsupported_media_type', message);
  if (status === 404) return HttpError.of('not_found', message);
  if (status === 405) return HttpError.of('method_not_allowed', message);
  if (status >= 400 && status < 500) {
    const json = e.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || e.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || err instanceof SyntaxError;
    return new HttpError(status, json ? 'invalid_json' : 'invalid_body', message);
  }
  return HttpError.of('internal', `internal error: ${withoutServerPaths(message)}`);
}
