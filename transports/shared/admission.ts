import { ERROR_CATALOGUE, type ErrorCode } from '../../src/errors';
import type { ServerContext } from './context';
import { HttpError } from './errors';
import type { ServedModel } from './served-engine';
import { usableModels } from './usable-models';

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
 * Resolves model `id` (the engine's default when undefined) through the engine's models. A model the server does not
 * offer — no such folder, or one whose `model.json` cannot be used (not listed by `/v1/models`, logged at start) — is
 * 404 `OMNIRX_ERR_UNKNOWN_MODEL` naming the models it does offer.
 * @throws HttpError 404 `OMNIRX_ERR_UNKNOWN_MODEL` (`param` "model"), or the engine's code and status.
 */
export async function loadModel(ctx: ServerContext, id: string | undefined): Promise<ServedModel> {
  try {
    return await ctx.engine().models.get(id);
  } catch (err) {
    const e = err as { code?: unknown; message?: unknown; param?: unknown };
    const message = typeof e.message === 'string' ? e.message : String(err);
    const name = id ?? ctx.engine().models.defaultModel ?? '(default)';
    // models.get reads only model.json: a load error here is a folder the server does not offer.
    if (e.code === 'OMNIRX_ERR_MODEL_LOAD' || (e.code === 'OMNIRX_ERR_UNKNOWN_MODEL' && e.param === 'model')) {
      const offered = (await usableModels(ctx.engine())).ids;
      const why = e.code === 'OMNIRX_ERR_MODEL_LOAD' ? ` (${message})` : '';
      throw HttpError.engine(
        'OMNIRX_ERR_UNKNOWN_MODEL',
        `model '${name.slice(0, 128)}' is not served${why}; available: ${offered.join(', ') || 'none'} (GET /v1/models)`,
        'model',
      );
    }
    const code = typeof e.code === 'string' && Object.prototype.hasOwnProperty.call(ERROR_CATALOGUE, e.code) ? (e.code as ErrorCode) : 'OMNIRX_ERR_MODEL_LOAD';
    throw HttpError.engine(code, message, 'model');
  }
}
