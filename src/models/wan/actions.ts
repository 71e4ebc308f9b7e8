import { z } from 'zod';
import { OmniError } from '../../errors';
import type { WanActionConfig } from './config';

/**
 * Action key names of the reference world-model family, in id order: id i is `ACTION_KEYS[i]`, id 0 = "none" (no
 * action). A model's `action.numKeys` may be smaller (it then accepts the first numKeys names) or larger (ids past
 * this list have no name and can only be given as `ChunkActions` ids).
 */
export const ACTION_KEYS = ['none', 'up', 'down', 'left', 'right'] as const;
export type ActionKey = (typeof ACTION_KEYS)[number];

/** One user-facing action for one frame: a named key and an optional continuous 2-vector (x, y), finite. */
export const ActionSchema = z.strictObject({
  key: z.enum(ACTION_KEYS),
  vector: z.tuple([z.number().finite(), z.number().finite()]).optional(),
});
export type Action = z.infer<typeof ActionSchema>;

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
  cfg: WanActionConfig | undefined,
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
