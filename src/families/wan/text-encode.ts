import { contentHash, type FeatureCache, type FeatureKey } from '../../cache/feature-cache';
import { createTensor, type NativeBinding, type NativeTensor } from '../../native/binding';
import type { WanT2VModel } from './model';
import type { CFGPolicy } from '../../pipeline/policies/cfg';
import type { RequestState } from '../../pipeline/request-state';
import type { Stage } from '../../pipeline/stage';
import { denoiseWork } from './denoise-work';
import type { WanT2VContext } from './context';
import type { WanT2VState } from './state';

/**
 * Tokenizes `text` and runs the model's T5-style encoder → hidden states `[1, Lt, dModel]` float32 (Lt = the
 * encoder's maxLength). The returned tensor belongs to `state`: it is freed (or its cache handle released) when
 * the state is released; the caller never disposes it.
 *
 * With a feature cache, the text is looked up by {sha256 of its token ids, `<model>/text_encoder`, no adapters,
 * epoch 0} and the encoder runs only on a miss; the state then borrows the cached tensor through a handle.
 */
export async function encodePrompt(
  env: { model: WanT2VModel; native: NativeBinding; featureCache?: FeatureCache },
  state: RequestState,
  text: string,
): Promise<NativeTensor> {
  const te = env.model.textEncoder;
  const L = te.config.maxLength;
  const cache = env.featureCache;
  const tokens = env.model.tokenizer.encode(text, L);
  if (cache === undefined) {
    const out = state.own(createTensor(env.native, [1, L, te.config.dModel]));
    await state.track(te.encode(tokens, out));
    return out;
  }
  const input = new Int32Array(tokens.ids.length + 1);
  input[0] = tokens.length;
  input.set(tokens.ids, 1);
  const key: FeatureKey = { contentHash: contentHash(input), encoderId: `${env.model.spec.id}/text_encoder`, adapterHash: '', weightEpoch: 0 };
  const hit = cache.acquire(key);
  if (hit !== undefined) {
    state.onRelease(() => hit.release());
    return hit.tensor;
  }
  const out = createTensor(env.native, [1, L, te.config.dModel]);
  try {
    await state.track(te.encode(tokens, out));
  } catch (err) {
    out.dispose();
    throw err;
  }
  const handle = cache.insert(key, out); // the cache owns `out` from here on
  state.onRelease(() => handle.release());
  return handle.tensor;
}

/**
 * `text_encoder` node: encodes the prompt (and, when the guidance policy will need it, the negative prompt) with
 * `encodePrompt`, writing `[1, Lt, dModel]` hidden states into the request state.
 */
export function createTextEncodeStage(cfg: CFGPolicy): Stage<WanT2VContext, WanT2VState> {
  return {
    name: 'text_encoder',
    async forward(ctx, state) {
      state.promptEmbeds = await encodePrompt(ctx, state, ctx.params.prompt);
      if (denoiseWork(ctx.params, ctx.nodeParams, cfg).guidedSteps > 0 && !ctx.signal.aborted)
        state.negativeEmbeds = await encodePrompt(ctx, state, ctx.params.negativePrompt);
    },
  };
}
