import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { answerOnSocket } from './client-error';
import { HttpError } from './errors';

/** Handles one accepted WebSocket connection; `url` is the parsed request URL (path and query). */
export type WebSocketHandler = (ws: WebSocket, req: IncomingMessage, url: URL) => void;

/** Options of `WebSocketRouter`. */
export interface WebSocketRouterOptions {
  /** Largest message a client may send, bytes (larger ones close the connection with 1009). Default 1 MiB. */
  maxPayloadBytes?: number;
  /**
   * Authorises an upgrade (e.g. the server's bearer token, from the `Authorization` header or, for browsers that
   * cannot set headers on a WebSocket, a `token` query parameter). Returns an error message to refuse with 401.
   */
  authorize?: (req: IncomingMessage, url: URL) => string | undefined;
}

/**
 * Routes HTTP upgrade requests of one Node HTTP server to WebSocket handlers by exact path (`route('/v1/…', h)`).
 * Every refusal is answered in the server's error shape and the socket closed — a stray or hostile upgrade never
 * hangs: an upgrade to anything but `websocket` (e.g. `h2c`) 400 `malformed_request`, an unknown path 404
 * `not_found`, refused authorisation 401 `unauthorized`, a handshake without a valid `Sec-WebSocket-Key` or version
 * 13 400 `malformed_request`. One `ws` server (noServer mode) accepts every route's connections.
 */
export class WebSocketRouter {
  private readonly routes = new Map<string, WebSocketHandler>();
  private readonly wss: WebSocketServer;

  constructor(private readonly options: WebSocketRouterOptions = {}) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: options.maxPayloadBytes ?? 2 ** 20 });
  }

  /** Serves WebSocket connections on `path`. @throws Error when the path already has a handler. */
  route(path: string, handler: WebSocketHandler): void {
    if (this.routes.has(path)) throw new Error(`WebSocketRouter: ${path} already has a handler`);
    this.routes.set(path, handler);
  }

  /** The paths served, in the order they were routed. */
  paths(): string[] {
    return [...this.routes.keys()];
  }

  /** The listener for the HTTP server's `upgrade` event. */
  readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      return answerOnSocket(socket, HttpError.of('malformed_request', 'the request URL cannot be parsed'));
    }
    const protocol = String(req.headers.upgrade ?? '').toLowerCase();
    if (protocol !== 'websocket') {
      return answerOnSocket(
        socket,
        HttpError.of(
          'malformed_request',
          `Upgrade: ${JSON.stringify(protocol.slice(0, 40))} is not served; this server upgrades only to websocket (on ${[...this.routes.keys()].join(', ')}); send plain HTTP/1.1 requests without an Upgrade header`,
        ),
      );
    }
    const handler = this.routes.get(url.pathname);
    if (handler === undefined)
      return answerOnSocket(
        socket,
        HttpError.of('not_found', `no WebSocket endpoint at ${url.pathname.slice(0, 200)}; the endpoints are ${[...this.routes.keys()].join(', ')}`),
      );
    const denied = this.options.authorize?.(req, url);
    if (denied !== undefined) return answerOnSocket(socket, HttpError.of('unauthorized', denied));
    const key = req.headers['sec-websocket-key'];
    if (typeof key !== 'string' || !/^[A-Za-z0-9+/]{22}==$/.test(key.trim()) || req.headers['sec-websocket-version'] !== '13') {
      return answerOnSocket(
        socket,
        HttpError.of('malformed_request', 'a WebSocket handshake needs Sec-WebSocket-Key (16 bytes, base64) and Sec-WebSocket-Version: 13 (RFC 6455 §4.1)'),
      );
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => handler(ws, req, url));
  };

  /** Closes every open connection (code 1001, going away). */
  close(): void {
    for (const ws of this.wss.clients) ws.close(1001, 'server closing');
    this.wss.close();
  }
}
