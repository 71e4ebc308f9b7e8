import { maxHeaderSize } from 'node:http';
import type { Socket } from 'node:net';
import { HttpError } from './errors';

/**
 * Answers a request Node's HTTP parser refused before Fastify saw it (headers over the size limit, a malformed
 * request line, a bad Content-Length or chunk size, a request that timed out) in the server's error shape,
 * `{"error": {type, message, param, code}}`, then closes the connection (the parser cannot find the next request).
 * A reset or already-destroyed socket gets nothing. Installed as Fastify's `clientErrorHandler`.
 * @param err the parser's error (`code` e.g. `HPE_HEADER_OVERFLOW`, `HPE_INVALID_METHOD`, `ERR_HTTP_REQUEST_TIMEOUT`).
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const e =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? HttpError.of('request_timeout', 'the request was not received in time')
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? HttpError.of('headers_too_large', `the request headers exceed the server's limit of ${maxHeaderSize} bytes`)
        : HttpError.of('malformed_request', `the request is not valid HTTP/1.1 (${err.code ?? 'parse error'}${typeof (err as { reason?: unknown }).reason === 'string' ? `: ${(err as { reason?: string }).reason}` : ''})`);
  const body = JSON.stringify(e.body());
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${e.status} ${STATUS_TEXT[e.status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy(err);
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };
