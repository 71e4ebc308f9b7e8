import { ERROR_CATALOGUE, type ErrorCode } from '../../src/errors';
import type { ServerContext } from './context';
import { HttpError } from './errors';
import type { ServedModel } from './served-engine';

/** @throws HttpError 503 `OMNIRX_ERR_UNAVAILABLE` unless the server is ready to admit work (not starting or draining). */
export function admitting(ctx: ServerContext): void {
  if (ctx.state.phase !== 'ready') {
    throw HttpError.engine(
      'OMNIRX_ERR_UNAVAILABLE',
      ctx.state.phase === 'draining' ? 'the server is draining and admits no new work' : 'the engine is not up yet',
    );
  }
}

/**
 * Resolves model `id` (the engine's default when undefined) through the engine's models.
 * @throws HttpError with the engine's code and status (404 `OMNIRX_ERR_UNKNOWN_MODEL`, `param` "model").
 */
export async function loadModel(ctx: ServerContext, id: string | undefined): Promise<ServedModel> {
  try {
    return await ctx.engine().models.get(id);
  } catch (err) {
    const e = err as { code?: unknown; message?: unknown };
    const code = typeof e.code === 'string' && Object.prototype.hasOwnProperty.call(ERROR_CATALOGUE, e.code) ? (e.code as ErrorCode) : 'OMNIRX_ERR_MODEL_LOAD';
    throw HttpError.engine(code, typeof e.message === 'string' ? e.message : String(err), 'model');
  }
}
