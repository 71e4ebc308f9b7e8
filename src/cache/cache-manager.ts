import { OmniError } from '../errors';
import type { CacheBudgets } from './budgets';
import { FeatureCache, type FeatureCacheStats } from './feature-cache';
import { PagedBlockPool, type PagedPoolStats } from './paged-pool';
import { SlabPool, type SlabPoolStats } from './slab-pool';

/** Which cache classes the deployed pipelines use; a class nobody needs gets no pool. */
export interface CacheNeeds {
  /** Encoder outputs reused across requests (any pipeline with a text encoder). */
  features: boolean;
  /** Chunk KV of causal video rollouts (world sessions). */
  chunkKv: boolean;
  /** Token KV of autoregressive loops. */
  tokenKv: boolean;
}

/** Occupancy of every pool that exists (absent: the class is not deployed or its budget is 0). */
export interface CacheManagerStats {
  features?: FeatureCacheStats;
  chunkKv?: SlabPoolStats;
  tokenKv?: PagedPoolStats;
}

/**
 * The cache plane of one engine (docs/design.md §8): one budgeted pool per cache class, created only when a deployed
 * pipeline needs that class, with budgets from the deploy config (`caches`). Every pool hands out `KVHandle`s or
 * feature handles owned by one request or session; an allocation failure (`PoolExhaustedError`,
 * OMNIRX_ERR_CACHE_EXHAUSTED) fails only that owner.
 *
 * Pools whose unit size depends on the model are created on first use: the chunk-KV slab is one latent-frame chunk's
 * K+V for one DiT layer, so its size is fixed by the first session's model and geometry, and the pool holds
 * ⌊chunkKvBytes / slabBytes⌋ slabs. A later session whose slabs differ in size is refused with a clear error (one
 * world model and chunk shape per deployment — the deploy config fixes the chunk shape).
 */
export class CacheManager {
  /** Feature cache (text embeddings); undefined when no deployed pipeline encodes text or its budget is 0. */
  readonly features?: FeatureCache;
  private slabPool?: SlabPool;
  private pagedPool?: PagedBlockPool;

  constructor(
    readonly budgets: CacheBudgets,
    readonly needs: CacheNeeds,
  ) {
    if (needs.features && budgets.featureCacheBytes > 0) this.features = new FeatureCache(budgets.featureCacheBytes);
  }

  /**
   * The chunk-KV slab pool for slabs of `slabBytes` bytes, created on first call.
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE when no deployed task uses chunk KV, the budget holds no slab of
   *   this size, or the pool already exists with another slab size.
   */
  chunkKv(slabBytes: number): SlabPool {
    if (!this.needs.chunkKv)
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', 'this deployment has no chunk-KV pool: add WORLD to the deploy config tasks to serve world sessions');
    if (this.slabPool === undefined) {
      const slabs = Math.floor(this.budgets.chunkKvBytes / slabBytes);
      if (!(slabs >= 1))
        throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `caches.chunkKvBytes (${this.budgets.chunkKvBytes}) holds no slab of ${slabBytes} bytes`, {
          param: 'caches.chunkKvBytes',
        });
      this.slabPool = new SlabPool({ name: 'chunk-kv', slabBytes, slabs });
    } else if (this.slabPool.slabBytes !== slabBytes) {
      throw new OmniError(
        'OMNIRX_ERR_UNSUPPORTED_VALUE',
        `the chunk-KV pool holds slabs of ${this.slabPool.slabBytes} bytes; this session needs ${slabBytes} (one world model and chunk shape per deployment)`,
      );
    }
    return this.slabPool;
  }

  /**
   * The paged token-KV pool for blocks of `bytesPerToken · tokenKvBlockTokens` bytes, created on first call.
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE when no deployed task uses token KV or the budget holds no block.
   */
  tokenKv(bytesPerToken: number): PagedBlockPool {
    if (!this.needs.tokenKv)
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', 'this deployment has no token-KV pool: no deployed pipeline runs an autoregressive loop');
    const blockBytes = bytesPerToken * this.budgets.tokenKvBlockTokens;
    if (this.pagedPool === undefined) {
      const blocks = Math.floor(this.budgets.tokenKvBytes / blockBytes);
      if (!(blocks >= 1))
        throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `caches.tokenKvBytes (${this.budgets.tokenKvBytes}) holds no block of ${blockBytes} bytes`, {
          param: 'caches.tokenKvBytes',
        });
      this.pagedPool = new PagedBlockPool({ name: 'text-kv', blockTokens: this.budgets.tokenKvBlockTokens, blockBytes, blocks });
    } else if (this.pagedPool.blockBytes !== blockBytes) {
      throw new OmniError(
        'OMNIRX_ERR_UNSUPPORTED_VALUE',
        `the token-KV pool holds blocks of ${this.pagedPool.blockBytes} bytes; this loop needs ${blockBytes}`,
      );
    }
    return this.pagedPool;
  }

  stats(): CacheManagerStats {
    return { features: this.features?.stats(), chunkKv: this.slabPool?.stats(), tokenKv: this.pagedPool?.stats() };
  }

  /** Frees the feature cache's tensors (the KV pools are logical: their owners free their buffers). */
  dispose(): void {
    this.features?.dispose();
  }
}
