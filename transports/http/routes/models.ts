import type { FastifyInstance } from 'fastify';
import type { ServerContext } from '../../shared/context';
import { usableModels } from '../../shared/usable-models';
import { HttpError } from '../../shared/errors';

/**
 * Registers `GET /v1/models` (OpenAI list shape) and `GET /v1/models/{id}` (one model object; 404 `not_found` with
 * `param: "model"` for an id the engine does not serve). Only models whose `model.json` reads are listed
 * (`usableModels`); the server logs the others at start. `created` is the server's start, unix seconds.
 */
export function registerModelRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const created = Math.floor(Date.now() / 1000);
  const model = (id: string) => ({ id, object: 'model', created, owned_by: 'omnirx' });
  app.get('/v1/models', async () => ({ object: 'list', data: (await usableModels(ctx.engine())).ids.map(model) }));
  app.get<{ Params: { id: string } }>('/v1/models/:id', async (req) => {
    const id = req.params.id;
    if (!(await usableModels(ctx.engine())).ids.includes(id))
      throw HttpError.of('not_found', `no model '${id.slice(0, 200)}'; GET /v1/models lists the models served`, 'model');
    return model(id);
  });
}
