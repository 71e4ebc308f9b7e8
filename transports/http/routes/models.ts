import type { FastifyInstance } from 'fastify';
import type { ServerContext } from '../context';

/** Registers `GET /v1/models` (OpenAI list shape; `created` is the server's start, unix seconds). */
export function registerModelRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const created = Math.floor(Date.now() / 1000);
  app.get('/v1/models', async () => ({
    object: 'list',
    data: ctx.engine().listModels().map((id) => ({ id, object: 'model', created, owned_by: 'omnirx' })),
  }));
}
