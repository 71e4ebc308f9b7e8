import type { ServedEngine } from './served-engine';

/** The models on disk split into those whose `model.json` reads (servable) and those that do not, with why. */
export interface UsableModels {
  ids: string[];
  broken: Array<{ id: string; code: string; message: string }>;
}

/**
 * Reads every model the engine finds (`listModels()`) through `models.get` (its spec and family; weights are not
 * loaded), so a folder whose `model.json` is not valid is not offered to clients. Successful reads are cached by the
 * catalog; a broken model is read again each time, so fixing its file takes effect without a restart.
 */
export async function usableModels(engine: ServedEngine): Promise<UsableModels> {
  const ids = engine.listModels();
  const results = await Promise.allSettled(ids.map((id) => engine.models.get(id)));
  const out: UsableModels = { ids: [], broken: [] };
  results.forEach((r, i) => {
    if (r.status === 'fulfilled') out.ids.push(ids[i]!);
    else {
      const e = r.reason as { code?: unknown; message?: unknown };
      out.broken.push({ id: ids[i]!, code: typeof e.code === 'string' ? e.code : 'OMNIRX_ERR_MODEL_LOAD', message: String(e.message ?? r.reason) });
    }
  });
  return out;
}
