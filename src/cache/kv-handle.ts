import { OmniError } from '../errors';

/**
 * The common face of the KV cache classes (docs/design.md §8): each class (paged text KV, slab chunk KV) is a separate
 * pool with a static budget, and whatever it hands out is a `KVHandle`. The pools here are *logical* allocators:
 * they hand out slab/block indices and never touch memory; the physical buffers belong to the runtime.
 */

/** A claim on part of one pool's budget, owned by a request or a session. */
export interface KVHandle {
  /** Name of the pool the claim is on (e.g. `'chunk-kv'`, `'text-kv'`). */
  readonly pool: string;
  /** Who holds it (request or session id); for error messages and accounting. */
  readonly owner: string;
  /** Bytes of the pool's budget the handle holds right now (units held × bytes per unit). 0 once released. */
  readonly bytes: number;
  /** Returns everything the handle holds to its pool. Idempotent: a second call is a no-op. */
  release(): void;
  /** True once `release()` has been called. */
  readonly released: boolean;
}

/** Stable code of PoolExhaustedError (in the error catalogue, src/errors.ts). */
export const CACHE_EXHAUSTED_CODE = 'OMNIRX_ERR_CACHE_EXHAUSTED' as const;

/** What a pool counts in (a slab of chunk KV, a block of token KV). */
export type PoolUnit = 'slabs' | 'blocks';

/**
 * A pool could not satisfy an allocation from its free units. Thrown for the asking owner only: the pool and every
 * other handle are unchanged (allocations are all-or-nothing).
 */
export class PoolExhaustedError extends Error {
  override readonly name: string = 'PoolExhaustedError';
  readonly code = CACHE_EXHAUSTED_CODE;
  /** HTTP status for transports (capacity, retry later). */
  readonly status = 503;

  constructor(
    /** Name of the exhausted pool. */
    readonly pool: string,
    /** The owner whose allocation failed. */
    readonly owner: string,
    /** Units asked for by the failed allocation. */
    readonly requested: number,
    /** Units free when it failed (less than `requested`). */
    readonly free: number,
    /** Units of `requested`/`free`. */
    readonly unit: PoolUnit,
    /** Bytes per unit, to report the request in bytes too. */
    readonly unitBytes: number,
    /** Total units in the pool's budget. */
    readonly total: number,
  ) {
    super(
      `KV pool "${pool}" exhausted: owner "${owner}" asked for ${requested} ${unit} (${requested * unitBytes} bytes), ` +
        `${free} of ${total} ${unit} free (${free * unitBytes} bytes)`,
    );
  }
}

/**
 * Free indices `[0, n)` handed out lowest index first (a binary min-heap), so allocation order is deterministic.
 * Internal to the pools.
 */
export class IndexFreeList {
  private readonly heap: number[];

  constructor(n: number) {
    // 0, 1, …, n−1 in order is already a valid min-heap.
    this.heap = Array.from({ length: n }, (_, i) => i);
  }

  /** Number of free indices. */
  get size(): number {
    return this.heap.length;
  }

  /** Takes the `count` lowest free indices, ascending; the caller checks `size` first. */
  take(count: number): number[] {
    if (count > this.heap.length) throw new RangeError(`IndexFreeList: take(${count}) with ${this.heap.length} free`);
    const out: number[] = [];
    for (let i = 0; i < count; i++) out.push(this.pop());
    return out;
  }

  /** Returns indices to the free list. */
  put(indices: readonly number[]): void {
    for (const i of indices) this.push(i);
  }

  private push(x: number): void {
    const h = this.heap;
    let i = h.length;
    h.push(x);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p]! <= x) break;
      h[i] = h[p]!;
      i = p;
    }
    h[i] = x;
  }

  private pop(): number {
    const h = this.heap;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= h.length) break;
        const r = l + 1;
        const c = r < h.length && h[r]! < h[l]! ? r : l;
        if (h[c]! >= last) break;
        h[i] = h[c]!;
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
}

/** Throws `OMNIRX_ERR_UNSUPPORTED_VALUE` unless `v` is a safe integer ≥ `min`. */
export function checkCount(where: string, name: string, v: number, min: number): void {
  if (!Number.isSafeInteger(v) || v < min) throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `${where}: ${name} must be an integer ≥ ${min}, got ${v}`);
}
