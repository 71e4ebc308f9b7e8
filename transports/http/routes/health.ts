import type { FastifyInstance } from 'fastify';
import type { ServerContext } from '../../shared/context';
import { HttpError } from '../../shared/errors';

/**
 * Registers the open operational routes: `/health` (liveness: 200 while the process serves HTTP and its pipeline can
 * recover; 503 `OMNIRX_ERR_STAGE_FAILED` once it is down for good, so a supervisor restarts the server), `/ready` (200
 * only while admitting work; 503 before the engine is up, while draining, while a stage process restarts and once the
 * pipeline is down) and `/metrics` (Prometheus text format from the server's own registry).
 */
export function registerHealthRoutes(app: FastifyInstance, ctx: ServerContext): void {
  app.get('/health', async () => {
    const h = ctx.state.phase === 'ready' ? ctx.engine().health() : { status: 'ok' as const };
    if (h.status === 'down') throw HttpError.engine('OMNIRX_ERR_STAGE_FAILED', `down: ${h.reason}`);
    return { status: 'ok' };
  });
  app.get('/ready', async () => {
    if (ctx.state.phase !== 'ready') throw HttpError.engine('OMNIRX_ERR_UNAVAILABLE', `not ready: ${ctx.state.phase}`);
    const h = ctx.engine().health();
    if (h.status === 'down') throw HttpError.engine('OMNIRX_ERR_STAGE_FAILED', `not ready: ${h.reason}`);
    if (h.status === 'degraded') throw HttpError.engine('OMNIRX_ERR_UNAVAILABLE', `not ready: ${h.reason}`);
    return { status: 'ready', ...ctx.engine().stats() };
  });
  app.get('/metrics', async (_req, reply) => reply.type(ctx.metrics.registry.contentType).send(await ctx.metrics.registry.metrics()));
}
