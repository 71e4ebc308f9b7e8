import { PoolExhaustedError } from '../../src/cache/kv-handle';
import { PagedBlockPool, type PagedSequence } from '../../src/cache/paged-pool';
import { prng } from '../helpers/prng';

/** No block owned twice, used + free = total, and every table exactly fits its length. */
function checkInvariants(pool: PagedBlockPool, seqs: readonly PagedSequence[]): void {
  const seen = new Set<number>();
  const bad: number[] = [];
  let held = 0;
  for (const s of seqs) {
    for (const b of s.blocks) {
      if (!(b >= 0 && b < pool.totalBlocks) || seen.has(b)) bad.push(b);
      seen.add(b);
    }
    held += s.blocks.length;
    const ok = s.released
      ? s.blocks.length === 0 && s.length === 0 && s.bytes === 0
      : s.blocks.length === Math.ceil(s.length / pool.blockTokens) &&
        s.capacity === s.blocks.length * pool.blockTokens &&
        s.bytes === s.blocks.length * pool.blockBytes;
    if (!ok) bad.push(-1 - held); // accounting of this sequence is off
  }
  expect(bad).toEqual([]);
  const st = pool.stats();
  expect(st.used).toBe(held);
  expect(st.used + st.free).toBe(st.blocks);
  expect(st.sequences).toBe(seqs.filter((s) => !s.released).length);
  expect(st.usedBytes).toBe(st.used * st.blockBytes);
}

describe('PagedBlockPool', () => {
  it('allocates ceil(tokens / blockTokens) blocks lowest first and appends only when the last block is full', () => {
    const pool = new PagedBlockPool({ blockTokens: 16, blockBytes: 64 * 1024, blocks: 8 });
    expect(pool.stats()).toEqual({ blocks: 8, used: 0, free: 8, sequences: 0, blockTokens: 16, blockBytes: 65536, usedBytes: 0 });
    const s = pool.allocate('req-1', 20);
    expect(s.pool).toBe('text-kv');
    expect(s.owner).toBe('req-1');
    expect(s.blocks).toEqual([0, 1]);
    expect(s.length).toBe(20);
    expect(s.capacity).toBe(32);
    expect(s.bytes).toBe(2 * 65536);
    expect(s.append(12)).toEqual([]); // 32 tokens: still fits
    expect(s.blocks).toEqual([0, 1]);
    expect(s.append(1)).toEqual([2]);
    expect(s.append(0)).toEqual([]);
    expect(s.length).toBe(33);
    expect(s.append(40)).toEqual([3, 4]); // 73 tokens → 5 blocks
    expect(s.blocks).toEqual([0, 1, 2, 3, 4]);
    expect(pool.stats()).toMatchObject({ used: 5, free: 3, sequences: 1, usedBytes: 5 * 65536 });
    const empty = pool.allocate('req-2', 0);
    expect(empty.blocks).toEqual([]);
    expect(empty.append(1)).toEqual([5]);
    checkInvariants(pool, [s, empty]);
  });

  it('the block table is a snapshot: mutating it does not touch the sequence', () => {
    const pool = new PagedBlockPool({ blockTokens: 4, blockBytes: 1, blocks: 4 });
    const s = pool.allocate('a', 8);
    (s.blocks as number[]).push(99);
    expect(s.blocks).toEqual([0, 1]);
  });

  it('exhaustion is atomic: the sequence keeps its blocks, the pool is unchanged, others keep working', () => {
    const pool = new PagedBlockPool({ name: 'thinker-kv', blockTokens: 4, blockBytes: 10, blocks: 6 });
    const a = pool.allocate('a', 10); // 3 blocks
    const b = pool.allocate('b', 8); // 2 blocks
    let err: unknown;
    try {
      a.append(7); // 17 tokens → 5 blocks: needs 2, 1 free
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PoolExhaustedError);
    const pe = err as PoolExhaustedError;
    expect(pe.code).toBe('OMNIRX_ERR_CACHE_EXHAUSTED');
    expect(pe).toMatchObject({ pool: 'thinker-kv', owner: 'a', requested: 2, free: 1, total: 6, unit: 'blocks' });
    expect(pe.message).toContain('"a" asked for 2 blocks (20 bytes), 1 of 6 blocks free (10 bytes)');
    expect(a.blocks).toEqual([0, 1, 2]);
    expect(a.length).toBe(10);
    expect(pool.stats()).toMatchObject({ used: 5, free: 1, sequences: 2 });
    expect(() => pool.allocate('c', 9)).toThrow(PoolExhaustedError);
    expect(pool.stats()).toMatchObject({ used: 5, free: 1, sequences: 2 });
    // others keep working
    expect(b.append(1)).toEqual([5]);
    expect(a.append(2)).toEqual([]); // fits in a's last block
    checkInvariants(pool, [a, b]);
  });

  it('release returns all blocks; double release is a no-op; freed blocks are reused lowest first', () => {
    const pool = new PagedBlockPool({ blockTokens: 2, blockBytes: 1, blocks: 10 });
    const a = pool.allocate('a', 5); // 0,1,2
    const b = pool.allocate('b', 4); // 3,4
    a.release();
    expect(a.released).toBe(true);
    expect([a.blocks, a.length, a.bytes]).toEqual([[], 0, 0]);
    expect(pool.stats()).toMatchObject({ used: 2, sequences: 1 });
    a.release();
    expect(pool.stats()).toMatchObject({ used: 2, sequences: 1 });
    expect(() => a.append(1)).toThrow(/after release/);
    expect(b.append(3)).toEqual([0, 1]);
    expect(pool.allocate('c', 1).blocks).toEqual([2]);
  });

  it('rejects bad configuration and token counts', () => {
    expect(() => new PagedBlockPool({ blockTokens: 0, blockBytes: 1, blocks: 1 })).toThrow(/blockTokens/);
    expect(() => new PagedBlockPool({ blockTokens: 1, blockBytes: 0, blocks: 1 })).toThrow(/blockBytes/);
    const pool = new PagedBlockPool({ blockTokens: 4, blockBytes: 1, blocks: 4 });
    expect(() => pool.allocate('x', -1)).toThrow(/tokens/);
    const s = pool.allocate('x', 1);
    expect(() => s.append(0.5)).toThrow(/tokens/);
    expect(s.length).toBe(1);
  });

  it('fuzz: random allocate/append/release keeps the invariants', () => {
    for (const seed of [3, 11, 99, 2024]) {
      const rnd = prng(seed);
      const int = (n: number): number => Math.floor(rnd() * n);
      const pool = new PagedBlockPool({ blockTokens: 1 + int(16), blockBytes: 7, blocks: 30 + int(50) });
      const seqs: PagedSequence[] = [];
      let exhausted = 0;
      for (let step = 0; step < 800; step++) {
        const live = seqs.filter((s) => !s.released);
        const op = rnd();
        if (op < 0.15 || live.length === 0) {
          const before = pool.stats();
          try {
            seqs.push(pool.allocate(`r${step}`, int(120)));
          } catch (e) {
            expect(e).toBeInstanceOf(PoolExhaustedError);
            exhausted++;
            expect(pool.stats()).toEqual(before);
          }
        } else if (op < 0.27) {
          live[int(live.length)]!.release();
        } else if (op < 0.3) {
          seqs[int(seqs.length)]!.release(); // possibly a double release
        } else {
          const s = live[int(live.length)]!;
          const before = { blocks: s.blocks, length: s.length, stats: pool.stats() };
          const n = int(40);
          try {
            const added = s.append(n);
            expect(s.length).toBe(before.length + n);
            expect(s.blocks).toEqual([...before.blocks, ...added]);
          } catch (e) {
            expect(e).toBeInstanceOf(PoolExhaustedError);
            exhausted++;
            expect(s.blocks).toEqual(before.blocks);
            expect(s.length).toBe(before.length);
            expect(pool.stats()).toEqual(before.stats);
          }
        }
        checkInvariants(pool, seqs);
      }
      expect(exhausted).toBeGreaterThan(0);
      for (const s of seqs) s.release();
      expect(pool.stats()).toMatchObject({ used: 0, free: pool.totalBlocks, sequences: 0 });
    }
  });
});
