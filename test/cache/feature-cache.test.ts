import { contentHash, FeatureCache, type FeatureKey } from '../../src/cache/feature-cache';
import { createTensor, loadNative, type NativeTensor } from '../../src/native/binding';

const native = loadNative();
const key = (text: string, over: Partial<FeatureKey> = {}): FeatureKey => ({
  contentHash: contentHash(text),
  encoderId: 'm/text_encoder',
  adapterHash: '',
  weightEpoch: 0,
  ...over,
});
/** A tensor of `n` float32 elements (4·n bytes) filled with `v`. */
const tensor = (n: number, v = 1): NativeTensor => createTensor(native, [n], new Float32Array(n).fill(v));

describe('FeatureCache', () => {
  it('counts misses and hits; a hit returns the inserted tensor', () => {
    const c = new FeatureCache(1024);
    expect(c.acquire(key('a'))).toBeUndefined();
    const t = tensor(4, 3);
    const h = c.insert(key('a'), t);
    expect(h.tensor).toBe(t);
    const h2 = c.acquire(key('a'));
    expect(h2?.tensor).toBe(t);
    expect(Array.from(h2!.tensor.data)).toEqual([3, 3, 3, 3]);
    expect(c.stats()).toEqual({ entries: 1, bytes: 16, hits: 1, misses: 1, evictions: 0 });
    h.release();
    h2!.release();
    c.dispose();
  });

  it('partitions the key: encoder, adapter set and weight epoch each miss', () => {
    const c = new FeatureCache(1024);
    c.insert(key('a'), tensor(2)).release();
    expect(c.acquire(key('a', { encoderId: 'other' }))).toBeUndefined();
    expect(c.acquire(key('a', { adapterHash: 'lora:0.8' }))).toBeUndefined();
    expect(c.acquire(key('a', { weightEpoch: 1 }))).toBeUndefined();
    expect(c.acquire(key('b'))).toBeUndefined();
    expect(c.stats().misses).toBe(4);
    c.dispose();
  });

  it('evicts freeable entries oldest-first, within the byte budget', () => {
    const c = new FeatureCache(48); // three 16-byte entries
    for (const k of ['a', 'b', 'c']) c.insert(key(k), tensor(4)).release();
    expect(c.stats()).toMatchObject({ entries: 3, bytes: 48, evictions: 0 });
    c.insert(key('d'), tensor(4)).release();
    expect(c.stats()).toMatchObject({ entries: 3, bytes: 48, evictions: 1 });
    expect(c.acquire(key('a'))).toBeUndefined(); // the oldest went first
    c.insert(key('e'), tensor(8)).release(); // 32 bytes: evicts b and c
    expect(c.stats()).toMatchObject({ entries: 2, bytes: 48, evictions: 3 });
    expect(c.acquire(key('b'))).toBeUndefined();
    expect(c.acquire(key('c'))).toBeUndefined();
    const d = c.acquire(key('d'));
    const e = c.acquire(key('e'));
    expect(d).toBeDefined();
    expect(e).toBeDefined();
    d!.release();
    e!.release();
    c.dispose();
  });

  it('never evicts an entry in use: a held entry outlives its eviction turn, the next freeable one goes instead', () => {
    const c = new FeatureCache(32);
    const a = c.insert(key('a'), tensor(4, 1)); // held
    c.insert(key('b'), tensor(4, 2)).release();
    c.insert(key('c'), tensor(4, 3)).release(); // a is oldest but in use: b is evicted
    expect(c.stats()).toMatchObject({ entries: 2, bytes: 32, evictions: 1 });
    expect(c.acquire(key('b'))).toBeUndefined();
    expect(Array.from(a.tensor.data)).toEqual([1, 1, 1, 1]);
    // Released, a joins the FIFO behind c, so c is evicted next.
    a.release();
    c.insert(key('d'), tensor(4)).release();
    expect(c.acquire(key('c'))).toBeUndefined();
    const again = c.acquire(key('a'));
    expect(again?.tensor).toBe(a.tensor);
    again!.release();
    c.dispose();
  });

  it('an insert that cannot fit is not cached but its handle works and frees the tensor on release', () => {
    const before = native.stats().bytesInUse;
    const c = new FeatureCache(32);
    const held = c.insert(key('a'), tensor(8)); // fills the budget, in use
    const t = tensor(4, 5);
    const h = c.insert(key('b'), t);
    expect(h.tensor).toBe(t);
    expect(Array.from(h.tensor.data)).toEqual([5, 5, 5, 5]);
    expect(c.stats()).toMatchObject({ entries: 1, bytes: 32, evictions: 0 });
    h.release();
    h.release(); // idempotent
    expect(t.disposed).toBe(true);
    expect(c.acquire(key('b'))).toBeUndefined();
    const big = c.insert(key('c'), tensor(100)); // larger than the whole budget
    expect(c.stats().entries).toBe(1);
    big.release();
    held.release();
    c.dispose();
    expect(native.stats().bytesInUse).toBe(before);
  });

  it('dispose frees freeable entries now and in-use ones on release; native bytes return to baseline', () => {
    const before = native.stats().bytesInUse;
    const c = new FeatureCache(1 << 20);
    const held = c.insert(key('a'), tensor(256));
    c.insert(key('b'), tensor(256)).release();
    const held2 = c.acquire(key('a'))!;
    expect(native.stats().bytesInUse).toBeGreaterThanOrEqual(before + 2 * 1024);
    c.dispose();
    expect(c.stats()).toMatchObject({ entries: 1, bytes: 1024 });
    expect(held.tensor.disposed).toBe(false);
    held.release();
    expect(held2.tensor.disposed).toBe(false); // still one reference
    held2.release();
    expect(held2.tensor.disposed).toBe(true);
    expect(c.stats()).toMatchObject({ entries: 0, bytes: 0 });
    // After dispose nothing is cached.
    expect(c.acquire(key('a'))).toBeUndefined();
    const late = c.insert(key('z'), tensor(4));
    expect(c.stats().entries).toBe(0);
    late.release();
    expect(native.stats().bytesInUse).toBe(before);
  });

  it('contentHash is sha256 of the bytes of the input', () => {
    const ids = Int32Array.of(1, 2, 3);
    expect(contentHash(ids)).toBe(contentHash(Int32Array.of(1, 2, 3)));
    expect(contentHash(ids)).not.toBe(contentHash(Int32Array.of(1, 2, 4)));
    expect(contentHash(ids.subarray(1))).toBe(contentHash(Int32Array.of(2, 3)));
    expect(contentHash(ids)).toMatch(/^[0-9a-f]{64}$/);
  });
});
