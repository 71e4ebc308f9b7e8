import { z } from 'zod';

/**
 * T5-encoder-style text encoder (Raffel et al. 2020) in the HF T5 v1.1 layout: gated-GELU FFN, RMS layer norms,
 * one relative-position bias table in layer 0 shared by every layer. Wan 2.1's UMT5 keeps a table per layer;
 * that layout is not supported yet.
 */
export const T5ConfigSchema = z.strictObject({
  vocabSize: z.number().int().min(260).max(1 << 20),
  dModel: z.number().int().min(8).max(8192),
  dKv: z.number().int().min(4).max(1024),
  numHeads: z.number().int().min(1).max(128),
  dFf: z.number().int().min(8).max(65536),
  numLayers: z.number().int().min(1).max(96),
  relativeAttentionNumBuckets: z.number().int().min(2).max(1024),
  relativeAttentionMaxDistance: z.number().int().min(2).max(1 << 16),
  eps: z.number().positive().max(1e-2),
  /** Tokens per encoded text (padded or truncated to it). */
  maxLength: z.number().int().min(2).max(4096),
});
export type T5Config = z.infer<typeof T5ConfigSchema>;
