import { CacheManager } from '../../src/cache/cache-manager';
import { CacheBudgetsSchema } from '../../src/cache/budgets';

const budgets = (over: Record<string, number> = {}) => CacheBudgetsSchema.parse(over);

describe('CacheManager', () => {
  it('creates only the pools the deployment needs', () => {
    const t2v = new CacheManager(budgets(), { features: true, chunkKv: false, tokenKv: false });
    expect(t2v.features).toBeDefined();
    expect(t2v.stats()).toEqual({ features: { entries: 0, bytes: 0, hits: 0, misses: 0, evictions: 0 }, chunkKv: undefined, tokenKv: undefined });
    expect(() => t2v.chunkKv(1024)).toThrow(expect.objectContaining({ code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', message: expect.stringMatching(/add WORLD/) }));
    expect(() => t2v.tokenKv(64)).toThrow(/no token-KV pool/);
    expect(new CacheManager(budgets({ featureCacheBytes: 0 }), { features: true, chunkKv: false, tokenKv: false }).features).toBeUndefined();
  });

  it('sizes the chunk-KV pool from its byte budget on first use and refuses another slab size', () => {
    const m = new CacheManager(budgets({ chunkKvBytes: 10_000 }), { features: false, chunkKv: true, tokenKv: false });
    expect(m.stats().chunkKv).toBeUndefined();
    const pool = m.chunkKv(1000);
    expect(pool.totalSlabs).toBe(10);
    expect(m.chunkKv(1000)).toBe(pool);
    expect(() => m.chunkKv(2000)).toThrow(/holds slabs of 1000 bytes; this session needs 2000/);
    const s = pool.openSession('a', { sinkChunks: 1, windowChunks: 2, layers: 2 });
    s.appendChunk();
    expect(m.stats().chunkKv).toMatchObject({ used: 2, usedBytes: 2000, sessions: 1 });
    s.release();
    expect(m.stats().chunkKv).toMatchObject({ used: 0, sessions: 0 });
    const tiny = new CacheManager(budgets({ chunkKvBytes: 999 }), { features: false, chunkKv: true, tokenKv: false });
    expect(() => tiny.chunkKv(1000)).toThrow(expect.objectContaining({ param: 'caches.chunkKvBytes' }));
  });

  it('sizes the token-KV pool in blocks of tokenKvBlockTokens tokens', () => {
    const m = new CacheManager(budgets({ tokenKvBytes: 64 * 16 * 10, tokenKvBlockTokens: 16 }), { features: false, chunkKv: false, tokenKv: true });
    const pool = m.tokenKv(64);
    expect({ blocks: pool.totalBlocks, blockBytes: pool.blockBytes, blockTokens: pool.blockTokens }).toEqual({ blocks: 10, blockBytes: 1024, blockTokens: 16 });
    expect(() => m.tokenKv(32)).toThrow(/holds blocks of 1024 bytes; this loop needs 512/);
  });
});
