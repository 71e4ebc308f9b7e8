import type { FastifyInstance } from 'fastify';
import type { ServerContext } from '../../shared/context';
import { HttpError } from '../../shared/errors';

/**
 * Registers the open operational routes: `/health` (liveness: 200 while the process serves HTTP), `/ready`
 * (200 only while admitting work; 503 before the engine is up and while draining) and `/metrics` (Prometheus
 * text format from the server's own registry).
 */
export function registerHealthRoutes(app: FastifyInstance, ctx: ServerContext): void {
  app.get('/health', async () => ({ status: 'ok' }));
  app.get('/ready', async () => {
    if (ctx.state.phase !== 'ready') throw HttpError.engine('OMNIRX_ERR_UNAVAILABLE', `not ready: ${ctx.state.phase}`);
    return { status: 'ready', ...ctx.engine().stats() };
  });
  app.get('/metrics', async (_req, reply) => reply.type(ctx.metrics.registry.contentType).send(await ctx.metrics.registry.metrics()));
}
