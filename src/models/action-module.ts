import { z } from 'zod';
import { OmniError } from '../errors';

/**
 * Per-frame action conditioning of a world model (see `recordActionEmbedding` in dit-blocks.ts): a discrete key set
 * (key 0 = "none") embedded by a table, plus an optional continuous action vector projected by a Linear layer. The
 * sum is added to each latent frame's time embedding before `time_proj`, so it conditions every block's adaLN
 * modulation and the head (Genie, Bruce et al. 2024; Oasis / DIAMOND-style action-conditioned world models).
 */
export const ActionModuleConfigSchema = z.strictObject({
  /** Number of discrete action keys, key 0 meaning "no action". */
  numKeys: z.number().int().min(2).max(4096),
  /** Width of the continuous action vector per frame (e.g. 2 for a 2-D direction); 0 = no vector. */
  vectorDim: z.number().int().min(0).max(256),
});
export type ActionModuleConfig = z.infer<typeof ActionModuleConfigSchema>;

/**
 * The actions of the C frames of one chunk (or of the latent frames of one `WanDiT` row), as the model takes them:
 * `keys[f]` is frame f's integer key id in [0, numKeys); `vectors` is `[C, vectorDim]` row-major float32, only for models
 * with vectorDim > 0 (omitted → zeros).
 */
export interface ChunkActions {
  keys: readonly number[];
  vectors?: Float32Array;
}

/**
 * Validates `actions` for `frames` frames against the model's action module and writes them into the plan's staging
 * buffers: `keysOut` `[frames]` (float32 integer ids, for the `embedding` op) and `vectorsOut` `[frames, vectorDim]`
 * (float32; absent when vectorDim = 0). Omitted actions mean key 0 ("none") and zero vectors for every frame.
 * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE (message prefixed by `who`) when actions are given to a model without
 *   an action module, for a wrong number of keys or vector values, a non-integer or out-of-range key, or a non-finite
 *   vector value; the message names the offending frame index.
 */
export function writeChunkActions(
  cfg: ActionModuleConfig | undefined,
  frames: number,
  actions: ChunkActions | undefined,
  out: { keys?: Float32Array; vectors?: Float32Array },
  who: string,
): void {
  const bad = (msg: string): never => {
    throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `${who}: ${msg}`);
  };
  if (cfg === undefined) {
    if (actions !== undefined) bad('this model has no action module, but actions were given');
    return;
  }
  const keys = out.keys as Float32Array;
  if (actions === undefined) {
    keys.fill(0, 0, frames);
    out.vectors?.fill(0);
    return;
  }
  if (actions.keys.length !== frames) bad(`need ${frames} action keys (one per latent frame), got ${actions.keys.length}`);
  actions.keys.forEach((k, f) => {
    if (!Number.isInteger(k) || k < 0 || k >= cfg.numKeys) bad(`action key ${k} at frame ${f} is not an integer in [0, ${cfg.numKeys})`);
  });
  const v = actions.vectors;
  if (v !== undefined) {
    if (cfg.vectorDim === 0) bad('this model takes no action vectors, but vectors were given');
    if (v.length !== frames * cfg.vectorDim) bad(`action vectors have ${v.length} values, expected ${frames}×${cfg.vectorDim}`);
    const i = v.findIndex((x) => !Number.isFinite(x));
    if (i >= 0) bad(`action vector value ${v[i]} at frame ${Math.floor(i / cfg.vectorDim)} is not finite`);
  }
  keys.set(actions.keys);
  if (out.vectors !== undefined) {
    if (v === undefined) out.vectors.fill(0);
    else out.vectors.set(v);
  }
}
