/**
 * A small least-recently-used map for per-shape native resources (compiled plans, staging tensors): at most
 * `capacity` entries; inserting beyond it disposes the least recently used one. Keeps a server's native memory
 * bounded when requests keep changing sizes. A plan disposed while one of its runs is in flight stays alive until
 * that run finishes (the addon co-owns its memory).
 */
export class LruCache<V> {
  private readonly entries = new Map<string, V>();

  constructor(
    readonly capacity: number,
    private readonly disposeValue: (v: V) => void,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`LruCache capacity must be a positive integer, got ${capacity}`);
  }

  /** The value for `key`, made by `create` when absent; marks it most recently used. */
  getOrCreate(key: string, create: () => V): V {
    let v = this.entries.get(key);
    if (v !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, v);
      return v;
    }
    v = create();
    this.entries.set(key, v);
    while (this.entries.size > this.capacity) {
      const [oldest, value] = this.entries.entries().next().value as [string, V];
      this.entries.delete(oldest);
      this.disposeValue(value);
    }
    return v;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Disposes every entry. */
  clear(): void {
    for (const v of this.entries.values()) this.disposeValue(v);
    this.entries.clear();
  }
}
