import { z } from 'zod';

/** Video frames as packed RGB24, layout `[F, H, W, 3]`, uint8. */
export const VideoArtifactSchema = z.strictObject({
  kind: z.literal('video'),
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  numFrames: z.number().int().positive(),
  /** Playback rate, frames per second. */
  fps: z.number().positive(),
  frames: z.instanceof(Uint8Array),
});

/** One image as packed RGB24, layout `[H, W, 3]`, uint8. */
export const ImageArtifactSchema = z.strictObject({
  kind: z.literal('image'),
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  pixels: z.instanceof(Uint8Array),
});

/** Final latents, float32, layout given by `shape` (e.g. `[C, F, H, W]`). */
export const LatentsArtifactSchema = z.strictObject({
  kind: z.literal('latents'),
  shape: z.array(z.number().int().nonnegative()),
  data: z.instanceof(Float32Array),
});

export const ArtifactSchema = z.discriminatedUnion('kind', [VideoArtifactSchema, ImageArtifactSchema, LatentsArtifactSchema]);
export type VideoArtifact = z.infer<typeof VideoArtifactSchema>;
export type ImageArtifact = z.infer<typeof ImageArtifactSchema>;
export type LatentsArtifact = z.infer<typeof LatentsArtifactSchema>;
export type Artifact = z.infer<typeof ArtifactSchema>;
