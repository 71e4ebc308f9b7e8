import { createHash } from 'node:crypto';
import type { NativeTensor } from '../native/binding';

/**
 * Identity of a cached feature (docs/design.md §8): the key is partitioned, never flushed by a patch, so two requests
 * share an entry only when all four parts agree.
 */
export interface FeatureKey {
  /** sha256 (hex) of the encoder input, e.g. the token ids — see `contentHash`. */
  readonly contentHash: string;
  /** Encoder identity, e.g. `${modelId}/text_encoder`. */
  readonly encoderId: string;
  /** Hash of the adapter set applied to the encoder (ids + strengths); '' when none. */
  readonly adapterHash: string;
  /** Weight epoch of the encoder; bumped when its weights are updated in place. */
  readonly weightEpoch: number;
}

/**
 * A reference to a feature tensor. The tensor stays valid until `release()`; the holder must never dispose it.
 * `release()` is idempotent.
 */
export interface FeatureHandle {
  readonly tensor: NativeTensor;
  release(): void;
}

export interface FeatureCacheStats {
  /** Entries resident in the cache (in use or freeable). */
  entries: number;
  /** Bytes held by resident entries. */
  bytes: number;
  hits: number;
  misses: number;
  /** Freeable entries evicted to make room. */
  evictions: number;
}

/** sha256 (hex) of `data`'s bytes: the content hash of an encoder input. */
export function contentHash(data: ArrayBufferView | string): string {
  const h = createHash('sha256');
  if (typeof data === 'string') h.update(data, 'utf8');
  else h.update(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  return h.digest('hex');
}

/** Byte size of a float32 native tensor. */
export function tensorBytes(t: NativeTensor): number {
  return t.numel * Float32Array.BYTES_PER_ELEMENT;
}

interface Entry {
  readonly id: string;
  readonly tensor: NativeTensor;
  /** Bytes of `tensor`. */
  readonly bytes: number;
  refs: number;
}

/**
 * Budgeted feature cache (text embeddings etc.), after vLLM's `EncoderCacheManager`: entries are keyed by
 * content hash × encoder id × adapter-set hash × weight epoch and reference-counted. An entry whose count drops to
 * 0 stays resident in a freeable FIFO and is evicted oldest-first when an insert would exceed the byte budget;
 * entries in use are never evicted. An insert that cannot fit even after evicting every freeable entry is not
 * cached: its handle still works and disposes the tensor on release — a full cache never fails a request.
 *
 * The cache owns every tensor inserted into it; holders only release handles.
 */
export class FeatureCache {
  private readonly entries = new Map<string, Entry>();
  /** Entries with refs = 0, oldest first (Map keeps insertion order). */
  private readonly freeable = new Map<string, Entry>();
  private bytesUsed = 0;
  private hits = 0;
  private misses = 0;
  private evictions = 0;
  private disposed = false;

  /** @param budgetBytes most bytes resident entries may hold. */
  constructor(readonly budgetBytes: number) {
    if (!(budgetBytes >= 0)) throw new RangeError(`FeatureCache: budget must be ≥ 0 bytes, got ${budgetBytes}`);
  }

  /** The map key of `key`. */
  static idOf(key: FeatureKey): string {
    return JSON.stringify([key.contentHash, key.encoderId, key.adapterHash, key.weightEpoch]);
  }

  /** A handle on the cached feature of `key` (counted as a hit), or undefined (counted as a miss). */
  acquire(key: FeatureKey): FeatureHandle | undefined {
    const e = this.disposed ? undefined : this.entries.get(FeatureCache.idOf(key));
    if (e === undefined) {
      this.misses += 1;
      return undefined;
    }
    this.hits += 1;
    return this.ref(e);
  }

  /**
   * Takes ownership of `tensor` as the feature of `key` and returns a handle on it. Evicts freeable entries
   * (oldest first) to make room; when it cannot fit in the budget (or the key is already cached, or the cache is
   * disposed) the tensor is not cached and is disposed when the handle is released.
   */
  insert(key: FeatureKey, tensor: NativeTensor): FeatureHandle {
    const id = FeatureCache.idOf(key);
    const bytes = tensorBytes(tensor);
    if (this.disposed || this.entries.has(id) || !this.makeRoom(bytes)) return uncached(tensor);
    const e: Entry = { id, tensor, bytes, refs: 0 };
    this.entries.set(id, e);
    this.bytesUsed += bytes;
    return this.ref(e);
  }

  stats(): FeatureCacheStats {
    return { entries: this.entries.size, bytes: this.bytesUsed, hits: this.hits, misses: this.misses, evictions: this.evictions };
  }

  /** Frees every freeable entry now and every in-use entry when its last handle is released; later inserts are not cached. */
  dispose(): void {
    this.disposed = true;
    for (const e of [...this.freeable.values()]) this.drop(e);
  }

  /** Evicts freeable entries until `bytes` more fit in the budget; false (evicting nothing) if they never can. */
  private makeRoom(bytes: number): boolean {
    let reclaimable = 0;
    for (const e of this.freeable.values()) reclaimable += e.bytes;
    if (this.bytesUsed - reclaimable + bytes > this.budgetBytes) return false;
    for (const e of this.freeable.values()) {
      if (this.bytesUsed + bytes <= this.budgetBytes) break;
      this.drop(e);
      this.evictions += 1;
    }
    return true;
  }

  private ref(e: Entry): FeatureHandle {
    e.refs += 1;
    this.freeable.delete(e.id);
    let released = false;
    return {
      tensor: e.tensor,
      release: () => {
        if (released) return;
        released = true;
        e.refs -= 1;
        if (e.refs > 0) return;
        if (this.disposed) this.drop(e);
        else this.freeable.set(e.id, e);
      },
    };
  }

  private drop(e: Entry): void {
    this.freeable.delete(e.id);
    this.entries.delete(e.id);
    this.bytesUsed -= e.bytes;
    e.tensor.dispose();
  }
}

/** A handle on a tensor the cache did not keep: releasing it disposes the tensor. */
function uncached(tensor: NativeTensor): FeatureHandle {
  let released = false;
  return {
    tensor,
    release: () => {
      if (released) return;
      released = true;
      tensor.dispose();
    },
  };
}
