import { PoolExhaustedError } from '../../src/cache/kv-handle';
import { SlabPool, type SlabSession } from '../../src/cache/slab-pool';
import { prng } from '../helpers/prng';

const MB = 1 << 20;

/** No slab owned twice, and used + free = total, with `used` matching what the sessions hold. */
function checkInvariants(pool: SlabPool, sessions: readonly SlabSession[]): void {
  const seen = new Set<number>();
  const bad: number[] = []; // out-of-range or doubly owned slabs, −1 for a session whose accounting is off
  let held = 0;
  for (const s of sessions) {
    if (s.released) {
      if (s.slabs().length !== 0 || s.bytes !== 0) bad.push(-1);
      continue;
    }
    for (const slab of s.slabs()) {
      if (!(slab >= 0 && slab < pool.totalSlabs) || seen.has(slab)) bad.push(slab);
      seen.add(slab);
    }
    held += s.slabs().length;
    if (s.bytes !== s.slabs().length * pool.slabBytes) bad.push(-1);
    if (s.slabs().length > s.config.layers * (s.config.sinkChunks + s.config.windowChunks)) bad.push(-1);
  }
  expect(bad).toEqual([]);
  const st = pool.stats();
  expect(st.used).toBe(held);
  expect(st.used + st.free).toBe(st.slabs);
  expect(st.sessions).toBe(sessions.filter((s) => !s.released).length);
  expect(st.usedBytes).toBe(st.used * st.slabBytes);
}

describe('SlabPool', () => {
  it('allocates one slab per layer per chunk, lowest index first, and accounts bytes', () => {
    const pool = new SlabPool({ slabBytes: 10 * MB, slabs: 16 });
    expect(pool.stats()).toEqual({ slabs: 16, used: 0, free: 16, sessions: 0, slabBytes: 10 * MB, usedBytes: 0 });
    const s = pool.openSession('game-1', { sinkChunks: 1, windowChunks: 2, layers: 3 });
    expect(s.pool).toBe('chunk-kv');
    expect(s.owner).toBe('game-1');
    expect(s.bytes).toBe(0);
    expect(pool.stats().sessions).toBe(1);
    expect(s.appendChunk()).toEqual({ chunk: 0, slabs: [0, 1, 2] });
    expect(s.appendChunk()).toEqual({ chunk: 1, slabs: [3, 4, 5] });
    expect(s.bytes).toBe(6 * 10 * MB);
    expect(pool.stats()).toMatchObject({ used: 6, free: 10, usedBytes: 60 * MB });
    expect(s.chunks()).toEqual([0, 1]);
    expect(s.slabsOf(1)).toEqual([3, 4, 5]);
    expect(s.slabsOf(7)).toBeUndefined();
  });

  it('pins sink chunks and recycles the oldest window chunk once the window is full', () => {
    const pool = new SlabPool({ slabBytes: 1, slabs: 64 });
    const s = pool.openSession('s', { sinkChunks: 2, windowChunks: 3, layers: 2 });
    for (let i = 0; i < 5; i++) s.appendChunk();
    expect(s.chunks()).toEqual([0, 1, 2, 3, 4]);
    expect(pool.stats().used).toBe(10);
    const c2 = s.slabsOf(2)!;
    const r5 = s.appendChunk();
    expect(r5).toEqual({ chunk: 5, slabs: c2, evicted: 2 });
    expect(s.chunks()).toEqual([0, 1, 3, 4, 5]);
    const c3 = s.slabsOf(3)!;
    expect(s.appendChunk()).toEqual({ chunk: 6, slabs: c3, evicted: 3 });
    expect(s.chunks()).toEqual([0, 1, 4, 5, 6]);
    expect(pool.stats().used).toBe(10);
  });

  it('keeps usage flat over 2,000 chunks, sinks untouched', () => {
    const pool = new SlabPool({ slabBytes: 32 * MB, slabs: 200 });
    const s = pool.openSession('long', { sinkChunks: 1, windowChunks: 4, layers: 30 });
    const sinkSlabs = s.appendChunk().slabs;
    const cap = 30 * 5;
    for (let i = 1; i < 2000; i++) {
      const r = s.appendChunk();
      expect(r.chunk).toBe(i);
      expect(r.slabs).toHaveLength(30);
      if (i >= 5) expect(r.evicted).toBe(i - 4);
      expect(pool.stats().used).toBe(Math.min(30 * (i + 1), cap));
    }
    expect(s.appended).toBe(2000);
    expect(s.chunks()).toEqual([0, 1996, 1997, 1998, 1999]);
    expect(s.slabsOf(0)).toEqual(sinkSlabs);
    expect(s.bytes).toBe(cap * 32 * MB);
    expect(pool.stats()).toMatchObject({ used: cap, free: 50 });
    s.release();
    expect(pool.stats()).toMatchObject({ used: 0, free: 200, sessions: 0 });
  });

  it('windowChunks 1 with no sink keeps exactly one chunk', () => {
    const pool = new SlabPool({ slabBytes: 1, slabs: 2 });
    const s = pool.openSession('s', { sinkChunks: 0, windowChunks: 1, layers: 2 });
    expect(s.appendChunk()).toEqual({ chunk: 0, slabs: [0, 1] });
    expect(s.appendChunk()).toEqual({ chunk: 1, slabs: [0, 1], evicted: 0 });
    expect(s.chunks()).toEqual([1]);
  });

  it('exhaustion fails only the asking session and loses nothing', () => {
    const pool = new SlabPool({ name: 'wan-chunks', slabBytes: 100, slabs: 10 });
    const a = pool.openSession('a', { sinkChunks: 0, windowChunks: 2, layers: 4 });
    const b = pool.openSession('b', { sinkChunks: 1, windowChunks: 1, layers: 4 });
    a.appendChunk();
    a.appendChunk(); // a: 8 slabs, window full
    let err: unknown;
    try {
      b.appendChunk();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PoolExhaustedError);
    const pe = err as PoolExhaustedError;
    expect(pe.code).toBe('OMNIRX_ERR_CACHE_EXHAUSTED');
    expect(pe).toMatchObject({ pool: 'wan-chunks', owner: 'b', requested: 4, free: 2, total: 10, unit: 'slabs' });
    expect(pe.message).toContain('wan-chunks');
    expect(pe.message).toContain('"b"');
    expect(pe.message).toContain('4 slabs (400 bytes)');
    expect(pe.message).toContain('2 of 10 slabs free (200 bytes)');
    // b is unchanged and nothing leaked
    expect(b.chunks()).toEqual([]);
    expect(b.appended).toBe(0);
    expect(pool.stats()).toMatchObject({ used: 8, free: 2, sessions: 2 });
    // a keeps working (recycling needs no new slabs)
    expect(a.appendChunk().evicted).toBe(0);
    checkInvariants(pool, [a, b]);
    // once a releases, b can proceed
    a.release();
    expect(b.appendChunk()).toEqual({ chunk: 0, slabs: [0, 1, 2, 3] });
    checkInvariants(pool, [a, b]);
  });

  it('release returns every slab; double release is a no-op; use after release throws', () => {
    const pool = new SlabPool({ slabBytes: 8, slabs: 12 });
    const a = pool.openSession('a', { sinkChunks: 1, windowChunks: 1, layers: 3 });
    const b = pool.openSession('b', { sinkChunks: 0, windowChunks: 2, layers: 3 });
    a.appendChunk();
    a.appendChunk();
    b.appendChunk();
    expect(pool.stats()).toMatchObject({ used: 9, sessions: 2 });
    a.release();
    expect(a.released).toBe(true);
    expect(a.bytes).toBe(0);
    expect(a.chunks()).toEqual([]);
    expect(pool.stats()).toMatchObject({ used: 3, sessions: 1 });
    a.release();
    expect(pool.stats()).toMatchObject({ used: 3, sessions: 1 });
    expect(() => a.appendChunk()).toThrow(/after release/);
    // freed slabs are reused lowest first
    expect(b.appendChunk().slabs).toEqual([0, 1, 2]);
    checkInvariants(pool, [a, b]);
  });

  it('rejects bad configuration', () => {
    expect(() => new SlabPool({ slabBytes: 0, slabs: 4 })).toThrow(/slabBytes/);
    expect(() => new SlabPool({ slabBytes: 1, slabs: 1.5 })).toThrow(/slabs/);
    const pool = new SlabPool({ slabBytes: 1, slabs: 4 });
    expect(() => pool.openSession('x', { sinkChunks: 0, windowChunks: 0, layers: 1 })).toThrow(/windowChunks/);
    expect(() => pool.openSession('x', { sinkChunks: -1, windowChunks: 1, layers: 1 })).toThrow(/sinkChunks/);
    expect(() => pool.openSession('x', { sinkChunks: 0, windowChunks: 1, layers: 0 })).toThrow(/layers/);
    expect(pool.stats().sessions).toBe(0);
  });

  it('fuzz: random open/append/release keeps the invariants', () => {
    for (const seed of [1, 7, 42, 1234]) {
      const rnd = prng(seed);
      const int = (n: number): number => Math.floor(rnd() * n);
      const pool = new SlabPool({ slabBytes: 3, slabs: 40 + int(40) });
      const sessions: SlabSession[] = [];
      let exhausted = 0;
      for (let step = 0; step < 600; step++) {
        const live = sessions.filter((s) => !s.released);
        const op = rnd();
        if (op < 0.1 || live.length === 0) {
          sessions.push(pool.openSession(`s${step}`, { sinkChunks: int(3), windowChunks: 1 + int(4), layers: 1 + int(6) }));
        } else if (op < 0.2) {
          live[int(live.length)]!.release();
        } else if (op < 0.23) {
          sessions[int(sessions.length)]!.release(); // possibly a double release
        } else {
          const s = live[int(live.length)]!;
          const before = { chunks: s.chunks(), slabs: s.slabs(), appended: s.appended, stats: pool.stats() };
          try {
            const r = s.appendChunk();
            expect(r.chunk).toBe(before.appended);
            expect(r.slabs).toHaveLength(s.config.layers);
            expect(s.chunks()[s.chunks().length - 1]).toBe(r.chunk);
          } catch (e) {
            expect(e).toBeInstanceOf(PoolExhaustedError);
            exhausted++;
            expect(s.chunks()).toEqual(before.chunks);
            expect(s.slabs()).toEqual(before.slabs);
            expect(s.appended).toBe(before.appended);
            expect(pool.stats()).toEqual(before.stats);
            expect((e as PoolExhaustedError).free).toBeLessThan(s.config.layers);
          }
        }
        checkInvariants(pool, sessions);
      }
      expect(exhausted).toBeGreaterThan(0);
      for (const s of sessions) s.release();
      expect(pool.stats()).toMatchObject({ used: 0, sessions: 0 });
    }
  });
});
