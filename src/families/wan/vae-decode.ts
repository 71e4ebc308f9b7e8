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

/**
 * Decodes the final latents `chunk` latent frames at a time with the VAE's streaming decoder (`VaeDecoder.createStream`:
 * each causal conv carries its last kt − 1 input frames to the next chunk, so the pixels equal a one-shot decode; the
 * Wan VAE here has no temporal compression, so a latent frame is a video frame). The last chunk, when shorter, is
 * padded with zero latents whose outputs are dropped: the decoder is causal in time, so frames after a frame never
 * change it. `onChunk` gets each chunk's RGB24 frames as soon as they are decoded; returns the whole video's.
 */
async function decodeRgbChunked(
  ctx: WanT2VContext,
  state: WanT2VState,
  chunk: number,
  onChunk: (firstFrame: number, frames: Uint8Array<ArrayBuffer>) => void,
): Promise<Uint8Array<ArrayBuffer>> {
  const latents = state.latents;
  if (latents === undefined) throw new Error('decode: the denoise output is missing');
  const [C, F, h, w] = latentShape(ctx);
  const n = Math.min(chunk, F);
  const stream = ctx.model.vae.createStream({ frames: n, height: h, width: w });
  state.onRelease(() => stream.dispose());
  const lat = state.own(createTensor(ctx.native, [...stream.latentShape]));
  const rgb = state.own(createTensor(ctx.native, [...stream.outputShape]));
  const plane = h * w;
  const frameBytes = ctx.params.height * ctx.params.width * 3;
  const video = new Uint8Array(F * frameBytes);
  try {
    for (let first = 0; first < F; first += n) {
      if (ctx.signal.aborted) throw new Error('decode: cancelled');
      const valid = Math.min(n, F - first);
      if (valid < n) lat.data.fill(0);
      for (let c = 0; c < C; c++) lat.data.set(latents.data.subarray((c * F + first) * plane, (c * F + first + valid) * plane), c * n * plane);
      await state.track(stream.decode(lat, rgb));
      const frames = toRgb24(rgb.data.subarray(0, valid * frameBytes));
      video.set(frames, first * frameBytes);
      onChunk(first, frames);
    }
  } finally {
    stream.dispose();
    state.free(lat);
    state.free(rgb);
  }
  return video;
}

/**
 * `decode_video` node (T2V): latents → RGB24 frames `[F, H, W, 3]`, the `video` artifact. With
 * `decodeChunkFrames` (`outputs.decodeChunkFrames`) it decodes that many frames at a time and emits each group as a
 * `chunk` event (a `video` artifact plus `decoded: { firstFrame, totalFrames }`) as soon as it is decoded; the
 * `video` artifact holds the same bytes either way.
 */
export const decodeVideoStage: Stage<WanT2VContext, WanT2VState> = {
  name: 'decode_video',
  async forward(ctx, state, emit) {
    const { width, height, numFrames, fps, decodeChunkFrames } = ctx.params;
    const frames =
      decodeChunkFrames === undefined
        ? await decodeRgb(ctx, state)
        : await decodeRgbChunked(ctx, state, decodeChunkFrames, (firstFrame, chunk) =>
            emit?.({
              artifact: { kind: 'video', width, height, numFrames: chunk.length / (width * height * 3), fps, frames: chunk },
              decoded: { firstFrame, totalFrames: numFrames },
            }),
          );
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
