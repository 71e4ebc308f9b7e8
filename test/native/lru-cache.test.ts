import { LruCache } from '../../src/native/lru-cache';

describe('LruCache', () => {
  it('keeps at most `capacity` entries, disposing the least recently used', () => {
    const disposed: string[] = [];
    const c = new LruCache<string>(2, (v) => disposed.push(v));
    c.getOrCreate('a', () => 'A');
    c.getOrCreate('b', () => 'B');
    expect(c.getOrCreate('a', () => 'A2')).toBe('A'); // hit: a becomes most recent
    c.getOrCreate('c', () => 'C'); // evicts b
    expect(disposed).toEqual(['B']);
    expect(c.size).toBe(2);
    c.clear();
    expect(disposed.sort()).toEqual(['A', 'B', 'C']);
    expect(c.size).toBe(0);
  });

  it('rejects a capacity below 1', () => {
    expect(() => new LruCache(0, () => undefined)).toThrow(RangeError);
  });
});
