import { OmniError } from '../../errors';
import { ACTION_KEYS, ActionSchema, type Action } from '../../request/action';
import type { ActionModuleConfig, ChunkActions } from '../../models/action-module';
import type { Policy } from './policy';

/**
 * How user-facing per-frame conditioning (actions of a world-model session or request) reaches the model: a policy
 * (docs/design.md §3: a plain object bound at build, stateless per request) that turns the actions of one chunk of C
 * latent frames into the model's `ChunkActions`, which the model injects into its per-frame conditioning.
 */
export interface ConditioningInjector extends Policy {
  readonly slot: 'conditioning';
  /**
   * The model actions of a chunk of `frames` latent frames: `actions` is one action per frame, or one action held
   * for every frame (a session samples the latest action at the chunk's start), or undefined (all "none"). Returns
   * undefined for a model without an action module (nothing to inject).
   * @throws OmniError OMNIRX_ERR_INVALID_REQUEST when an action fails `ActionSchema` (`param` names the frame);
   *   OMNIRX_ERR_UNSUPPORTED_VALUE when the model cannot take it (no action module, a key past its numKeys, a vector
   *   for a model without a 2-wide action vector, a per-frame list of the wrong length).
   */
  chunkActions(actions: Action | readonly Action[] | undefined, frames: number, model: ActionModuleConfig | undefined): ChunkActions | undefined;
}

/** Width of the user-facing action vector (`Action.vector` is (x, y)). */
const USER_VECTOR_DIM = 2;

/**
 * adaLN action injection: key names map to ids by their index in `ACTION_KEYS` ("none" = 0), vectors pass through
 * as `[C, 2]` (zeros for frames without one; omitted when no frame has one). The model adds the resulting action
 * embedding to each frame's time embedding before `time_proj` (see `recordConditionEmbeddings`).
 */
export const actionAdaLNInjector: ConditioningInjector = Object.freeze({
  slot: 'conditioning' as const,
  name: 'action-adaln',
  chunkActions(actions: Action | readonly Action[] | undefined, frames: number, model: ActionModuleConfig | undefined): ChunkActions | undefined {
    const unsupported = (msg: string): never => {
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `action-adaln: ${msg}`);
    };
    if (model === undefined) {
      if (actions !== undefined) unsupported('this model has no action module, but actions were given');
      return undefined;
    }
    if (actions === undefined) return { keys: new Array<number>(frames).fill(0) };
    const list: readonly unknown[] = Array.isArray(actions) ? actions : new Array<unknown>(frames).fill(actions);
    if (list.length !== frames) unsupported(`need ${frames} per-frame actions (one per latent frame of the chunk), got ${list.length}`);
    const parsed = list.map((a, f) => {
      const r = ActionSchema.safeParse(a);
      if (!r.success)
        throw new OmniError(
          'OMNIRX_ERR_INVALID_REQUEST',
          `action at frame ${f}: ${r.error.issues.map((i) => `${i.path.join('.') || 'action'}: ${i.message}`).join('; ')}`,
          { param: `actions.${f}` },
        );
      return r.data;
    });
    const keys = parsed.map(({ key }, f) => {
      const id = ACTION_KEYS.indexOf(key);
      if (id >= model.numKeys)
        unsupported(`action "${key}" at frame ${f} is not one of this model's ${model.numKeys} keys (${ACTION_KEYS.slice(0, model.numKeys).join(', ')})`);
      return id;
    });
    const withVector = parsed.findIndex((a) => a.vector !== undefined);
    if (withVector < 0) return { keys };
    if (model.vectorDim !== USER_VECTOR_DIM)
      unsupported(`the action at frame ${withVector} has a vector, but this model takes ${model.vectorDim === 0 ? 'none' : `${model.vectorDim}-wide vectors`}`);
    const vectors = new Float32Array(frames * USER_VECTOR_DIM);
    parsed.forEach((a, f) => {
      if (a.vector !== undefined) vectors.set(a.vector, f * USER_VECTOR_DIM);
    });
    return { keys, vectors };
  },
});
