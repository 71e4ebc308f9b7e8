import type { ServerMetrics } from './metrics';
import type { ServedEngine } from './served-engine';
import type { WebSocketRouter } from './websocket-router';

/** What every transport of one server shares: its engine, metrics, lifecycle state and WebSocket router. */
export interface ServerContext {
  /** The engine. @throws HttpError 503 `OMNIRX_ERR_UNAVAILABLE` while it is not up (starting, or failed to start). */
  engine: () => ServedEngine;
  metrics: ServerMetrics;
  /** `starting` until the engine is up, `ready` while admitting, `draining` once a drain began. */
  state: { phase: 'starting' | 'ready' | 'draining' };
  /** The server's WebSocket endpoints (one `upgrade` listener for every transport): `websockets.route(path, handler)`. */
  websockets: WebSocketRouter;
}
