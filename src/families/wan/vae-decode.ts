import { createTensor } from '../../native/binding';
import { toRgb24 } from '../../models/vae/decoder';
import type { Stage } from '../../pipeline/stage';
import { latentShape, type WanT2VContext } from './context';
import type { WanT2VState } from './state';

async function decodeRgb(ctx: WanT2VContext, state: WanT2VState): Promise<Uint8Array<ArrayBuffer>> {
  if (state.latents === undefined) throw new Error('decode: the denoise output is missing');
  const [, F, h, w] = latentShape(ctx);
  const rgb = state.own(createTensor(ctx.native, [F, ctx.params.height, ctx.params.width, 3]));
  await state.track(ctx.model.vae.decode(state.latents, rgb, { frames: F, height: h, width: w }));
  const bytes = toRgb24(rgb.data);
  state.free(rgb);
  return bytes;
}

/** `decode_video` node (T2V): latents → RGB24 frames `[F, H, W, 3]`, the `video` artifact. */
export const decodeVideoStage: Stage<WanT2VContext, WanT2VState> = {
  name: 'decode_video',
  async forward(ctx, state) {
    const frames = await decodeRgb(ctx, state);
    const { width, height, numFrames, fps } = ctx.params;
    state.artifacts.video = { kind: 'video', width, height, numFrames, fps, frames };
  },
};

/** `decode_image` node (T2I): latents of one frame → RGB24 pixels `[H, W, 3]`, the `image` artifact. */
export const decodeImageStage: Stage<WanT2VContext, WanT2VState> = {
  name: 'decode_image',
  async forward(ctx, state) {
    const pixels = await decodeRgb(ctx, state);
    state.artifacts.image = { kind: 'image', width: ctx.params.width, height: ctx.params.height, pixels };
  },
};

/** `export_latents` node (when requested): the final latents `[C, F, h, w]` as the `latents` artifact. */
export const exportLatentsStage: Stage<WanT2VContext, WanT2VState> = {
  name: 'export_latents',
  async forward(ctx, state) {
    if (state.latents === undefined) throw new Error('export_latents: the denoise output is missing');
    state.artifacts.latents = { kind: 'latents', shape: latentShape(ctx), data: Float32Array.from(state.latents.data) };
  },
};
