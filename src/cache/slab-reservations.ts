import { OmniError } from '../errors';
import type { CacheBudgets } from './budgets';
import { PoolExhaustedError } from './kv-handle';

/**
 * The front's logical account of the chunk-KV slab pool (docs/design.md §8: managers on the scheduler side own the
 * logical allocations, the workers the physical ones). Each open world session reserves, when it opens, the most slabs
 * it will ever hold, so no session fails for lack of KV room mid-rollout; the pool itself lives where the KV does (in
 * process, or on the Denoise stage) and has the same budget, so a reservation that fits here fits there.
 */
export class SlabReservations {
  private readonly reserved = new Map<string, number>();
  private slabBytes?: number;

  constructor(private readonly budgets: Pick<CacheBudgets, 'chunkKvBytes'>) {}

  /**
   * Reserves `slabs` slabs of `slabBytes` bytes for session `id`.
   * @throws PoolExhaustedError (OMNIRX_ERR_CACHE_EXHAUSTED) when the budget cannot hold them beside the sessions already
   *   open; OmniError OMNIRX_ERR_UNSUPPORTED_VALUE (`param` caches.chunkKvBytes) when it holds no slab of this size, or
   *   the pool's slabs have another size (one world model and chunk shape per deployment).
   */
  reserve(id: string, slabBytes: number, slabs: number): void {
    const total = Math.floor(this.budgets.chunkKvBytes / slabBytes);
    if (!(total >= 1))
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `caches.chunkKvBytes (${this.budgets.chunkKvBytes}) holds no slab of ${slabBytes} bytes`, {
        param: 'caches.chunkKvBytes',
      });
    if (this.slabBytes !== undefined && this.slabBytes !== slabBytes) {
      throw new OmniError(
        'OMNIRX_ERR_UNSUPPORTED_VALUE',
        `the chunk-KV pool holds slabs of ${this.slabBytes} bytes; this session needs ${slabBytes} (one world model and chunk shape per deployment)`,
      );
    }
    let used = 0;
    for (const n of this.reserved.values()) used += n;
    if (used + slabs > total) throw new PoolExhaustedError('chunk-kv', id, slabs, total - used, 'slabs', slabBytes, total);
    this.slabBytes = slabBytes;
    this.reserved.set(id, slabs);
  }

  /** Frees session `id`'s reservation (no-op when it holds none). */
  release(id: string): void {
    this.reserved.delete(id);
  }
}
