import { z } from 'zod';

/**
 * A small causal 3D conv VAE decoder in the structure of Wan 2.1's VAE (diffusers `AutoencoderKLWan`): causal
 * convolutions in time (no temporal compression here: one latent frame per video frame), RMS channel norms,
 * residual blocks, nearest 2× spatial upsampling. `channels[i]` is the width at the i-th resolution, starting at
 * the latent resolution; the spatial scale factor is 2^(channels.length − 1). Simplified against the full Wan VAE:
 * no mid-block attention, no temporal upsampling, upsamplers keep their width; the output is clamped to [−1, 1]
 * when converted to RGB24 (`toRgb24`), not inside the decoder.
 */
export const VaeConfigSchema = z
  .strictObject({
    zDim: z.number().int().min(1).max(256),
    channels: z.array(z.number().int().min(1).max(4096)).min(1).max(6),
    numResBlocks: z.number().int().min(1).max(8),
    /** Temporal kernel of the causal convolutions (1 = per-frame). */
    temporalKernel: z.number().int().min(1).max(7),
    /** Per-channel latent statistics: the decoder sees z = latents · std + mean. */
    latentsMean: z.array(z.number()),
    latentsStd: z.array(z.number().positive()),
  })
  .refine((c) => c.latentsMean.length === c.zDim && c.latentsStd.length === c.zDim, { message: 'latentsMean and latentsStd need zDim entries', path: ['latentsMean'] });
export type VaeConfig = z.infer<typeof VaeConfigSchema>;

/** Spatial downscale between pixels and latents. */
export function vaeScaleFactor(c: VaeConfig): number {
  return 2 ** (c.channels.length - 1);
}
