import { z } from 'zod';

const MiB = 2 ** 20;
const bytes = (max: number) => z.number().int().nonnegative().max(max);

/**
 * Budgets of the cache classes (docs/design.md §8), in bytes. A pool is created only when a deployed pipeline needs
 * it (see `CacheManager`); a budget of 0 disables the class.
 */
export const CacheBudgetsSchema = z.strictObject({
  /** Feature cache (encoder outputs such as text embeddings). Default 64 MiB. */
  featureCacheBytes: bytes(2 ** 40).default(64 * MiB),
  /** Chunk-KV slab pool of causal video rollouts (world sessions). Default 256 MiB. */
  chunkKvBytes: bytes(2 ** 40).default(256 * MiB),
  /** Paged token-KV pool of autoregressive loops (used once an AR family is deployed). Default 64 MiB. */
  tokenKvBytes: bytes(2 ** 40).default(64 * MiB),
  /** Tokens per block of the token-KV pool. Default 16. */
  tokenKvBlockTokens: z.number().int().min(1).max(4096).default(16),
});
export type CacheBudgets = z.infer<typeof CacheBudgetsSchema>;
