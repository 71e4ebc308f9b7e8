import { contentHash, type FeatureKey } from '../../cache/feature-cache';
import { createTensor, type NativeTensor } from '../../native/binding';
import type { CFGPolicy } from '../policies/cfg';
import type { Stage } from '../stage';
import type { WanT2VContext } from './context';
import type { WanT2VState } from './state';

/**
 * `text_encoder` node: tokenizes the prompt (and, when the guidance policy will need it, the negative prompt) and
 * runs the T5-style encoder, writing `[1, Lt, dModel]` hidden states into the request state.
 *
 * With a feature cache in the context, each text is looked up by {sha256 of its token ids, `<model>/text_encoder`,
 * no adapters, epoch 0} and the encoder runs only on a miss. The state then borrows the cached tensor: it holds the
 * cache handle and releases it when the request is released, and never disposes the tensor itself.
 */
export function createTextEncodeStage(cfg: CFGPolicy): Stage<WanT2VContext, WanT2VState> {
  return {
    name: 'text_encoder',
    async forward(ctx, state) {
      const te = ctx.model.textEncoder;
      const L = te.config.maxLength;
      const cache = ctx.featureCache;
      const encode = async (text: string): Promise<NativeTensor> => {
        const tokens = ctx.model.tokenizer.encode(text, L);
        if (cache === undefined) {
          const out = state.own(createTensor(ctx.native, [1, L, te.config.dModel]));
          await state.track(te.encode(tokens, out));
          return out;
        }
        const input = new Int32Array(tokens.ids.length + 1);
        input[0] = tokens.length;
        input.set(tokens.ids, 1);
        const key: FeatureKey = { contentHash: contentHash(input), encoderId: `${ctx.model.spec.id}/text_encoder`, adapterHash: '', weightEpoch: 0 };
        const hit = cache.acquire(key);
        if (hit !== undefined) {
          state.onRelease(() => hit.release());
          return hit.tensor;
        }
        const out = createTensor(ctx.native, [1, L, te.config.dModel]);
        try {
          await state.track(te.encode(tokens, out));
        } catch (err) {
          out.dispose();
          throw err;
        }
        const handle = cache.insert(key, out); // the cache owns `out` from here on
        state.onRelease(() => handle.release());
        return handle.tensor;
      };
      state.promptEmbeds = await encode(ctx.params.prompt);
      if (cfg.needsNegative(ctx.params.guidanceScale) && !ctx.signal.aborted) state.negativeEmbeds = await encode(ctx.params.negativePrompt);
    },
  };
}
