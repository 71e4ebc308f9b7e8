import type { NativeTensor } from '../../native/binding';
import { RequestState } from '../../pipeline/request-state';

/** Request state of the Wan T2V/T2I pipeline: one slot per edge of its graph. */
export class WanT2VState extends RequestState {
  /** text_encoder → denoise: prompt hidden states [1, Lt, textDim]. */
  promptEmbeds?: NativeTensor;
  /** text_encoder → denoise: negative-prompt hidden states (absent when guidance is off). */
  negativeEmbeds?: NativeTensor;
  /** denoise → vae_decoder: final latents [1, C, F, h, w]. */
  latents?: NativeTensor;
}
