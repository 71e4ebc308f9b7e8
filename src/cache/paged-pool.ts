import { OmniError } from '../errors';
import { checkCount, IndexFreeList, PoolExhaustedError, type KVHandle } from './kv-handle';

/** Budget of a `PagedBlockPool`. */
export interface PagedBlockPoolConfig {
  /** Pool name in handles and errors. Default `'text-kv'`. */
  name?: string;
  /** Tokens per block. */
  blockTokens: number;
  /** Bytes of one block (blockTokens · layers · 2 · kvHeads · headDim · dtype bytes). */
  blockBytes: number;
  /** Budget in blocks (N); block indices are `0 … N−1`. */
  blocks: number;
}

/** Occupancy of a `PagedBlockPool`. */
export interface PagedPoolStats {
  /** Budget in blocks. */
  blocks: number;
  /** Blocks held by live sequences. */
  used: number;
  /** Blocks free (blocks − used). */
  free: number;
  /** Live (unreleased) sequences. */
  sequences: number;
  /** Tokens per block. */
  blockTokens: number;
  /** Bytes per block. */
  blockBytes: number;
  /** used · blockBytes. */
  usedBytes: number;
}

/** One sequence's token KV in a `PagedBlockPool`. */
export interface PagedSequence extends KVHandle {
  /** Block table: token t lives in block `blocks[floor(t / blockTokens)]` at offset `t mod blockTokens`. */
  readonly blocks: readonly number[];
  /** Tokens held. */
  readonly length: number;
  /** Tokens the current blocks can hold (blocks.length · blockTokens). */
  readonly capacity: number;
  /**
   * Extends the sequence by `tokens`, allocating blocks only once the last one is full; returns the blocks newly
   * added to the table. All or nothing: if the pool cannot supply them, throws `PoolExhaustedError` and the
   * sequence (length and table) and the pool are unchanged.
   */
  append(tokens: number): number[];
}

/**
 * Logical paged allocator for the token-KV class (vLLM-style): fixed-size blocks of `blockTokens` tokens, a static
 * budget of N blocks, a per-sequence block table. Fork-free: no copy-on-write sharing, every block has exactly one
 * owner. Free blocks are handed out lowest index first, so allocation is deterministic. Only indices are handed
 * out — the physical buffers are the runtime's.
 */
export class PagedBlockPool {
  readonly name: string;
  /** Tokens per block. */
  readonly blockTokens: number;
  /** Bytes per block. */
  readonly blockBytes: number;
  /** Budget in blocks. */
  readonly totalBlocks: number;
  private readonly free: IndexFreeList;
  private readonly live = new Set<PagedSequenceImpl>();

  constructor(config: PagedBlockPoolConfig) {
    checkCount('PagedBlockPool', 'blockTokens', config.blockTokens, 1);
    checkCount('PagedBlockPool', 'blockBytes', config.blockBytes, 1);
    checkCount('PagedBlockPool', 'blocks', config.blocks, 0);
    this.name = config.name ?? 'text-kv';
    this.blockTokens = config.blockTokens;
    this.blockBytes = config.blockBytes;
    this.totalBlocks = config.blocks;
    this.free = new IndexFreeList(config.blocks);
  }

  /** Blocks needed to hold `tokens` tokens. */
  blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockTokens);
  }

  /** A new sequence of `tokens` tokens (≥ 0) for `owner`; throws `PoolExhaustedError` (nothing allocated) if they do not fit. */
  allocate(owner: string, tokens: number): PagedSequence {
    checkCount('PagedBlockPool.allocate', 'tokens', tokens, 0);
    const blocks = this.take(owner, this.blocksFor(tokens));
    const s = new PagedSequenceImpl(this, owner, blocks, tokens);
    this.live.add(s);
    return s;
  }

  stats(): PagedPoolStats {
    const used = this.totalBlocks - this.free.size;
    return {
      blocks: this.totalBlocks,
      used,
      free: this.free.size,
      sequences: this.live.size,
      blockTokens: this.blockTokens,
      blockBytes: this.blockBytes,
      usedBytes: used * this.blockBytes,
    };
  }

  /** @internal Takes `count` blocks for `owner`, all or nothing. */
  take(owner: string, count: number): number[] {
    if (this.free.size < count) throw new PoolExhaustedError(this.name, owner, count, this.free.size, 'blocks', this.blockBytes, this.totalBlocks);
    return this.free.take(count);
  }

  /** @internal Returns a released sequence's blocks. */
  close(seq: PagedSequenceImpl, blocks: readonly number[]): void {
    this.free.put(blocks);
    this.live.delete(seq);
  }
}

class PagedSequenceImpl implements PagedSequence {
  private readonly table: number[];
  private tokens: number;
  private isReleased = false;

  constructor(
    private readonly owningPool: PagedBlockPool,
    readonly owner: string,
    blocks: number[],
    tokens: number,
  ) {
    this.table = blocks;
    this.tokens = tokens;
  }

  get pool(): string {
    return this.owningPool.name;
  }

  get released(): boolean {
    return this.isReleased;
  }

  get blocks(): readonly number[] {
    return [...this.table];
  }

  get length(): number {
    return this.tokens;
  }

  get capacity(): number {
    return this.table.length * this.owningPool.blockTokens;
  }

  get bytes(): number {
    return this.table.length * this.owningPool.blockBytes;
  }

  append(tokens: number): number[] {
    if (this.isReleased) throw new OmniError('OMNIRX_ERR_INTERNAL', `PagedSequence "${this.owner}": append() after release()`);
    checkCount('PagedSequence.append', 'tokens', tokens, 0);
    const need = this.owningPool.blocksFor(this.tokens + tokens) - this.table.length;
    const added = need > 0 ? this.owningPool.take(this.owner, need) : [];
    this.table.push(...added);
    this.tokens += tokens;
    return [...added];
  }

  release(): void {
    if (this.isReleased) return;
    this.isReleased = true;
    const blocks = this.table.splice(0);
    this.tokens = 0;
    this.owningPool.close(this, blocks);
  }
}
