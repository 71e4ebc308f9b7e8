import { createTensor } from '../../native/binding';
import type { CFGPolicy } from '../policies/cfg';
import type { Stage } from '../stage';
import type { WanT2VContext } from './context';
import type { WanT2VState } from './state';

/**
 * `text_encoder` node: tokenizes the prompt (and, when the guidance policy will need it, the negative prompt) and
 * runs the T5-style encoder, writing `[1, Lt, dModel]` hidden states into the request state.
 */
export function createTextEncodeStage(cfg: CFGPolicy): Stage<WanT2VContext, WanT2VState> {
  return {
    name: 'text_encoder',
    async forward(ctx, state) {
      const te = ctx.model.textEncoder;
      const L = te.config.maxLength;
      const encode = async (text: string) => {
        const out = state.own(createTensor(ctx.native, [1, L, te.config.dModel]));
        await state.track(te.encode(ctx.model.tokenizer.encode(text, L), out));
        return out;
      };
      state.promptEmbeds = await encode(ctx.params.prompt);
      if (cfg.needsNegative(ctx.params.guidanceScale) && !ctx.signal.aborted) state.negativeEmbeds = await encode(ctx.params.negativePrompt);
    },
  };
}
