import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';

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
 * Unknown paths get a plain `404`, refused authorisation a `401`, and the socket is closed — a stray or hostile
 * upgrade never hangs. One `ws` server (noServer mode) accepts every route's connections.
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

  /** The listener for the HTTP server's `upgrade` event. */
  readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      return refuse(socket, 400, 'Bad Request');
    }
    const handler = this.routes.get(url.pathname);
    if (handler === undefined) return refuse(socket, 404, 'Not Found');
    const denied = this.options.authorize?.(req, url);
    if (denied !== undefined) return refuse(socket, 401, 'Unauthorized');
    this.wss.handleUpgrade(req, socket, head, (ws) => handler(ws, req, url));
  };

  /** Closes every open connection (code 1001, going away). */
  close(): void {
    for (const ws of this.wss.clients) ws.close(1001, 'server closing');
    this.wss.close();
  }
}

function refuse(socket: Duplex, status: number, text: string): void {
  socket.on('error', () => undefined);
  socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}
