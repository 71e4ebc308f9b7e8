import { createTensor } from '../../native/binding';
import { toRgb24 } from '../../models/vae/decoder';
import type { ImageArtifact } from '../../request/artifacts';
import { latentShape, type WanT2VContext } from './context';

/**
 * The first frame of the clean latents a flow-matching step predicts, x̂₀ = x_t − σ·v (Lipman et al. 2023: the model
 * predicts v = ε − x₀ for x_t = (1 − σ)·x₀ + σ·ε).
 * @param latents x_t, `[C, F, h, w]` float32.
 * @param velocity v at x_t (after guidance), same layout.
 * @param sigma σ of the step, in [0, 1].
 * @returns x̂₀ of frame 0, `[C, 1, h, w]` float32.
 */
export function predictedFirstFrame(
  latents: Float32Array,
  velocity: Float32Array,
  sigma: number,
  shape: readonly [number, number, number, number],
): Float32Array {
  const [C, F, h, w] = shape;
  const plane = h * w;
  const out = new Float32Array(C * plane);
  for (let c = 0; c < C; c++) {
    const src = c * F * plane;
    for (let i = 0; i < plane; i++) out[c * plane + i] = latents[src + i] - sigma * velocity[src + i];
  }
  return out;
}

/** Whether step `index` (0-based) of `total` emits a preview: every `previewEvery` steps, never on the last one (the final video follows at once). */
export function previewDue(index: number, total: number, previewEvery: number | undefined): boolean {
  return previewEvery !== undefined && index + 1 < total && (index + 1) % previewEvery === 0;
}

/**
 * Decodes a predicted first frame `[C, 1, h, w]` with the model's VAE into an RGB24 `image` artifact of the request's
 * size. Returns undefined when the VAE is not loaded here (the Denoise process of a disaggregated deployment loads
 * only the DiT), so previews never fail a request.
 */
export async function decodePreview(ctx: WanT2VContext, frame0: Float32Array): Promise<ImageArtifact | undefined> {
  if (!ctx.model.loadedComponents.includes('vae')) return undefined;
  const [C, , h, w] = latentShape(ctx);
  const { width, height } = ctx.params;
  const lat = createTensor(ctx.native, [C, 1, h, w], frame0);
  const rgb = createTensor(ctx.native, [1, height, width, 3]);
  try {
    await ctx.model.vae.decode(lat, rgb, { frames: 1, height: h, width: w });
    return { kind: 'image', width, height, pixels: toRgb24(rgb.data) };
  } finally {
    lat.dispose();
    rgb.dispose();
  }
}
