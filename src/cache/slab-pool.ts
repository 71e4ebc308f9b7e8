import { OmniError } from '../errors';
import { checkCount, IndexFreeList, PoolExhaustedError, type KVHandle } from './kv-handle';

/** Budget of a `SlabPool`. */
export interface SlabPoolConfig {
  /** Pool name in handles and errors. Default `'chunk-kv'`. */
  name?: string;
  /** Bytes of one slab: one latent-frame chunk's K+V for one DiT layer (chunkFrames · tokensPerFrame · dim · 2 · dtype bytes). */
  slabBytes: number;
  /** Budget in slabs (N); slab indices are `0 … N−1`. */
  slabs: number;
}

/** Shape of one causal-video rollout's chunk KV (chunk counts, not frames). */
export interface SlabSessionConfig {
  /** S: the first S chunks appended are pinned for the whole session ("attention sink"). ≥ 0. */
  sinkChunks: number;
  /**
   * W: how many of the most recent non-sink chunks stay resident, counting the one just appended. ≥ 1. Once W
   * non-sink chunks are resident, appending recycles the oldest one's slabs.
   */
  windowChunks: number;
  /** DiT layers: slabs per chunk (one K+V slab per layer). ≥ 1. */
  layers: number;
}

/** What `SlabSession.appendChunk()` did. */
export interface AppendedChunk {
  /** Index of the new chunk in the session (0, 1, 2, … in append order). */
  chunk: number;
  /** Its slabs, one per layer (`slabs[l]` holds layer l). */
  slabs: number[];
  /** The chunk whose slabs were recycled for it (the oldest non-sink chunk), or undefined if freshly allocated. */
  evicted?: number;
}

/** Occupancy of a `SlabPool`. */
export interface SlabPoolStats {
  /** Budget in slabs. */
  slabs: number;
  /** Slabs held by open sessions. */
  used: number;
  /** Slabs free (slabs − used). */
  free: number;
  /** Open sessions. */
  sessions: number;
  /** Bytes per slab. */
  slabBytes: number;
  /** used · slabBytes. */
  usedBytes: number;
}

/** One rollout's claim on a `SlabPool`: chunk KV with sink pinning and local-window recycling. */
export interface SlabSession extends KVHandle {
  readonly config: Readonly<SlabSessionConfig>;
  /**
   * Makes room for the next chunk's KV: `layers` slabs, recycled from the oldest non-sink chunk when the window is
   * full (usage stays flat), else taken from the pool lowest index first. Throws `PoolExhaustedError` (nothing
   * allocated, the session unchanged) when the pool has fewer than `layers` free slabs.
   */
  appendChunk(): AppendedChunk;
  /** Resident chunk indices in order (sink chunks, then the window oldest first). */
  chunks(): number[];
  /** The slabs of resident chunk `chunk` (one per layer), or undefined if it is not resident. */
  slabsOf(chunk: number): number[] | undefined;
  /** Every slab the session holds. */
  slabs(): number[];
  /** Chunks appended so far (resident or not). */
  readonly appended: number;
}

/**
 * Logical slab allocator for the chunk-KV class (causal video: Wan-Causal, Self-Forcing, world-model rollouts).
 * Every slab is the same size (`slabBytes`), so within the class there is no fragmentation; the budget is static.
 * Sessions draw `layers` slabs per appended chunk; sink chunks stay, and once a session's window is full it reuses
 * its oldest non-sink chunk's slabs, so a session's footprint is bounded by `layers · (sinkChunks + windowChunks)`
 * slabs however long it runs. Only indices are handed out — the physical buffers are the runtime's (cf. `KVCache`
 * in src/models/wan/kv-cache.ts, whose frame slots follow the same sink/ring rules).
 */
export class SlabPool {
  readonly name: string;
  /** Bytes per slab. */
  readonly slabBytes: number;
  /** Budget in slabs. */
  readonly totalSlabs: number;
  private readonly free: IndexFreeList;
  private readonly open = new Set<SlabSessionImpl>();

  constructor(config: SlabPoolConfig) {
    checkCount('SlabPool', 'slabBytes', config.slabBytes, 1);
    checkCount('SlabPool', 'slabs', config.slabs, 0);
    this.name = config.name ?? 'chunk-kv';
    this.slabBytes = config.slabBytes;
    this.totalSlabs = config.slabs;
    this.free = new IndexFreeList(config.slabs);
  }

  /** Opens a session for `owner`; it holds no slabs until its first `appendChunk()`. */
  openSession(owner: string, config: SlabSessionConfig): SlabSession {
    checkCount('SlabPool.openSession', 'sinkChunks', config.sinkChunks, 0);
    checkCount('SlabPool.openSession', 'windowChunks', config.windowChunks, 1);
    checkCount('SlabPool.openSession', 'layers', config.layers, 1);
    const s = new SlabSessionImpl(this, owner, Object.freeze({ sinkChunks: config.sinkChunks, windowChunks: config.windowChunks, layers: config.layers }));
    this.open.add(s);
    return s;
  }

  stats(): SlabPoolStats {
    const used = this.totalSlabs - this.free.size;
    return { slabs: this.totalSlabs, used, free: this.free.size, sessions: this.open.size, slabBytes: this.slabBytes, usedBytes: used * this.slabBytes };
  }

  /** @internal Takes `count` slabs for `owner`, all or nothing. */
  take(owner: string, count: number): number[] {
    if (this.free.size < count) throw new PoolExhaustedError(this.name, owner, count, this.free.size, 'slabs', this.slabBytes, this.totalSlabs);
    return this.free.take(count);
  }

  /** @internal Returns a closing session's slabs. */
  close(session: SlabSessionImpl, slabs: readonly number[]): void {
    this.free.put(slabs);
    this.open.delete(session);
  }
}

class SlabSessionImpl implements SlabSession {
  /** Sink chunks in order: [chunk index, slabs]. */
  private readonly sink: Array<[number, number[]]> = [];
  /** Window chunks oldest first: [chunk index, slabs]. */
  private readonly window: Array<[number, number[]]> = [];
  private next = 0;
  private isReleased = false;

  constructor(
    private readonly owningPool: SlabPool,
    readonly owner: string,
    readonly config: Readonly<SlabSessionConfig>,
  ) {}

  get pool(): string {
    return this.owningPool.name;
  }

  get released(): boolean {
    return this.isReleased;
  }

  get appended(): number {
    return this.next;
  }

  get bytes(): number {
    return (this.sink.length + this.window.length) * this.config.layers * this.owningPool.slabBytes;
  }

  appendChunk(): AppendedChunk {
    if (this.isReleased) throw new OmniError('OMNIRX_ERR_INTERNAL', `SlabSession "${this.owner}": appendChunk() after release()`);
    const chunk = this.next;
    if (chunk < this.config.sinkChunks) {
      const slabs = this.owningPool.take(this.owner, this.config.layers);
      this.sink.push([chunk, slabs]);
      this.next++;
      return { chunk, slabs: [...slabs] };
    }
    if (this.window.length >= this.config.windowChunks) {
      const [evicted, slabs] = this.window.shift()!;
      this.window.push([chunk, slabs]);
      this.next++;
      return { chunk, slabs: [...slabs], evicted };
    }
    const slabs = this.owningPool.take(this.owner, this.config.layers);
    this.window.push([chunk, slabs]);
    this.next++;
    return { chunk, slabs: [...slabs] };
  }

  chunks(): number[] {
    return [...this.sink, ...this.window].map(([c]) => c);
  }

  slabsOf(chunk: number): number[] | undefined {
    const hit = this.sink.find(([c]) => c === chunk) ?? this.window.find(([c]) => c === chunk);
    return hit ? [...hit[1]] : undefined;
  }

  slabs(): number[] {
    return [...this.sink, ...this.window].flatMap(([, s]) => s);
  }

  release(): void {
    if (this.isReleased) return;
    this.isReleased = true;
    const slabs = this.slabs();
    this.sink.length = 0;
    this.window.length = 0;
    this.owningPool.close(this, slabs);
  }
}
