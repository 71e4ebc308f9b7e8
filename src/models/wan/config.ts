import { z } from 'zod';
import { ActionModuleConfigSchema } from '../action-module';


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
    action: ActionModuleConfigSchema.optional(),
  })
  .refine((c) => c.dim % c.numHeads === 0 && (c.dim / c.numHeads) % 2 === 0, { message: 'dim / numHeads must be an even integer', path: ['numHeads'] })
  .refine((c) => c.action === undefined || c.patchSize[0] === 1, { message: 'action conditioning is per latent frame and needs a temporal patch of 1', path: ['action'] });
export type WanDiTConfig = z.infer<typeof WanDiTConfigSchema>;
