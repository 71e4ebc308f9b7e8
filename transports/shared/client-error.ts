import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { HttpError } from './errors';

/**
 * Answers `e` in the server's error shape on a raw socket (outside Fastify: parser refusals, upgrades, CONNECT) and
 * closes the connection.
 */
export function answerOnSocket(socket: Duplex, e: HttpError): void {
  socket.on('error', () => undefined);
  const body = JSON.stringify(e.body());
  socket.end(
    `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * Answers a request Node's HTTP parser refused before Fastify saw it (headers over the size limit, a malformed
 * request line, a bad Content-Length or chunk size, a request that timed out) in the server's error shape,
 * `{"error": {type, message, param, code}}`, then closes the connection (the parser cannot find the next request).
 * A reset or already-destroyed socket gets nothing. Installed as Fastify's `clientErrorHandler`.
 * @param err the parser's error (`code` e.g. `HPE_HEADER_OVERFLOW`, `HPE_INVALID_METHOD`, `ERR_HTTP_REQUEST_TIMEOUT`).
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const e =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? HttpError.of('request_timeout', 'the request was not received in time')
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? HttpError.of('headers_too_large', `the request headers exceed the server's limit of ${maxHeaderSize} bytes`)
        : HttpError.of(
            'malformed_request',
            `the request is not valid HTTP/1.1 (${err.code ?? 'parse error'}${typeof (err as { reason?: unknown }).reason === 'string' ? `: ${(err as { reason?: string }).reason}` : ''})`,
          );
  answerOnSocket(socket, e);
}
