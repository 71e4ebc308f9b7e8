import type { JobTable } from './jobs';
import type { ServerMetrics } from './metrics';
import type { ServedEngine } from './served-engine';

/** What the routes of one server share: its engine, job table, metrics and lifecycle state. */
export interface ServerContext {
  /** The engine. @throws HttpError 503 `OMNIRX_ERR_UNAVAILABLE` while it is not up (starting, or failed to start). */
  engine: () => ServedEngine;
  jobs: JobTable;
  metrics: ServerMetrics;
  /** `starting` until the engine is up, `ready` while admitting, `draining` once a drain began. */
  state: { phase: 'starting' | 'ready' | 'draining' };
  /** Longest wait of `POST /v1/videos` for the engine to admit (or reject) a job before answering `queued`, ms. */
  admitWaitMs: number;
}
