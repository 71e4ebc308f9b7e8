import { createTensor } from '../../native/binding';
import { toRgb24 } from '../../models/vae/decoder';
import type { Stage } from '../stage';
import { latentShape, type WanT2VContext } from './context';
import type { WanT2VState } from './state';

/**
 * `vae_decoder` node: decodes the final latents to RGB24 and stores the `video` artifact (T2V) or `image`
 * artifact (T2I), plus `latents` when the request asked for them.
 */
export const vaeDecodeStage: Stage<WanT2VContext, WanT2VState> = {
  name: 'vae_decoder',
  async forward(ctx, state) {
    if (state.latents === undefined) throw new Error('vae_decoder: the denoise output is missing');
    const [C, F, h, w] = latentShape(ctx);
    const { width, height } = ctx.params;
    const rgb = state.own(createTensor(ctx.native, [F, height, width, 3]));
    await state.track(ctx.model.vae.decode(state.latents, rgb, { frames: F, height: h, width: w }));
    const bytes = toRgb24(rgb.data);
    state.free(rgb);
    if (ctx.params.task === 'T2I') {
      state.artifacts.image = { kind: 'image', width, height, pixels: bytes };
    } else {
      state.artifacts.video = { kind: 'video', width, height, numFrames: F, fps: ctx.params.fps, frames: bytes };
    }
    if (ctx.params.returnLatents) {
      state.artifacts.latents = { kind: 'latents', shape: [C, F, h, w], data: Float32Array.from(state.latents.data) };
    }
  },
};
