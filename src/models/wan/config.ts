import { z } from 'zod';

/**
 * Per-frame action conditioning of a world model (see `recordActionEmbedding` in dit-blocks.ts): a discrete key set
 * (key 0 = "none") embedded by a table, plus an optional continuous action vector projected by a Linear layer. The
 * sum is added to each latent frame's time embedding before `time_proj`, so it conditions every block's adaLN
 * modulation and the head (Genie, Bruce et al. 2024; Oasis / DIAMOND-style action-conditioned world models).
 */
export const WanActionConfigSchema = z.strictObject({
  /** Number of discrete action keys, key 0 meaning "no action". */
  numKeys: z.number().int().min(2).max(4096),
  /** Width of the continuous action vector per frame (e.g. 2 for a 2-D direction); 0 = no vector. */
  vectorDim: z.number().int().min(0).max(256),
});
export type WanActionConfig = z.infer<typeof WanActionConfigSchema>;

/** Wan-2.1-style DiT (Wan Team 2025, "Wan: Open and Advanced Large-Scale Video Generative Models"), small. */
export const WanDiTConfigSchema = z
  .strictObject({
    /** (pt, ph, pw): latent frames × rows × columns per token. */
    patchSize: z.tuple([z.number().int().min(1).max(8), z.number().int().min(1).max(8), z.number().int().min(1).max(8)]),
    inChannels: z.number().int().min(1).max(256),
    outChannels: z.number().int().min(1).max(256),
    dim: z.number().int().min(8).max(8192),
    ffnDim: z.number().int().min(8).max(65536),
    numHeads: z.number().int().min(1).max(128),
    numLayers: z.number().int().min(1).max(128),
    /** Width of the text encoder's hidden states. */
    textDim: z.number().int().min(8).max(8192),
    /** Width of the sinusoidal timestep embedding. */
    freqDim: z.number().int().min(8).max(4096).multipleOf(2),
    eps: z.number().positive().max(1e-2),
    ropeTheta: z.number().positive(),
    /** Optional per-latent-frame action module (world models); requires a temporal patch of 1. */
    action: WanActionConfigSchema.optional(),
  })
  .refine((c) => c.dim % c.numHeads === 0 && (c.dim / c.numHeads) % 2 === 0, { message: 'dim / numHeads must be an even integer', path: ['numHeads'] })
  .refine((c) => c.action === undefined || c.patchSize[0] === 1, { message: 'action conditioning is per latent frame and needs a temporal patch of 1', path: ['action'] });
export type WanDiTConfig = z.infer<typeof WanDiTConfigSchema>;
