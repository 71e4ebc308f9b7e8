import type { FastifyInstance } from 'fastify';
import type { ServerContext } from '../shared/context';
import type { JobTable } from './jobs';
import { registerDemoRoutes } from './routes/demos';
import { registerDocsRoutes } from './routes/docs';
import { registerHealthRoutes } from './routes/health';
import { registerImageRoutes } from './routes/images';
import { registerModelRoutes } from './routes/models';
import { registerVideoRoutes, resumeQueuedJobs } from './routes/videos';

/** Options of {@link httpTransport}. */
export interface HttpTransportOptions {
  /** The server's shared context (engine, metrics, lifecycle state). */
  ctx: ServerContext;
  /** The server's video jobs (the server drains and closes them; the routes create, list, stream and cancel them). */
  jobs: JobTable;
  /** Longest wait of `POST /v1/videos` for admission (or rejection) before it answers `queued`, ms. Default 2000. */
  admitWaitMs?: number;
  /** Folder of the demo pages served at `/demos/…`. Default `demos/` at the package root. */
  demosDir?: string;
  /** Whether the server requires a bearer token on `/v1` (documented in `/openapi.json`). Default false. */
  bearerAuth?: boolean;
  /** Resolves once the engine is up: then the queued jobs a durable job table kept from an earlier run are submitted again. */
  engineReady?: Promise<void>;
}

/**
 * The HTTP transport (docs/http.md), a Fastify plugin: the open operational routes (`/health`, `/ready`,
 * `/metrics`), the OpenAI-compatible `/v1/models`, `/v1/videos` (jobs, SSE events, MP4 content) and
 * `/v1/images/generations`, the API docs (`/openapi.json`, `/docs`) and the demo pages at `/demos/…`. Body parsing,
 * auth, error shapes and the not-found answer are the parent's (`createServer` in transports/server.ts); it decorates
 * nothing.
 */
export async function httpTransport(app: FastifyInstance, opts: HttpTransportOptions): Promise<void> {
  const { ctx, jobs } = opts;
  registerHealthRoutes(app, ctx);
  registerModelRoutes(app, ctx);
  const videoCtx = { ...ctx, jobs, admitWaitMs: opts.admitWaitMs ?? 2000 };
  registerVideoRoutes(app, videoCtx);
  // An engine that failed to start leaves the queued jobs queued in the data folder, for the next start.
  void opts.engineReady
    ?.then(
      () => resumeQueuedJobs(videoCtx),
      () => undefined,
    )
    .catch((err: unknown) => app.log.error({ err }, 'resuming the queued jobs failed'));
  registerImageRoutes(app, ctx);
  registerDocsRoutes(app, ctx, { bearerAuth: opts.bearerAuth ?? false });
  registerDemoRoutes(app, opts.demosDir);
}
