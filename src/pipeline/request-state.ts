import type { NativeTensor } from '../native/binding';
import type { Artifact } from '../request/artifacts';

/**
 * Per-request mutable state owned by the runtime (docs/design.md §3): named artifacts, the native tensors the request
 * owns, and the native work it has in flight. `release()` frees every owned tensor once no tracked work is in
 * flight, so a cancelled request gives its memory back as soon as its last native call returns. Families extend
 * it with typed slots for their edges.
 */
export class RequestState {
  readonly artifacts: Record<string, Artifact> = {};
  private readonly owned = new Set<NativeTensor>();
  private readonly releaseCallbacks: Array<() => void> = [];
  private readonly inflight = new Set<Promise<unknown>>();
  private releaseRequested = false;
  private markReleased!: () => void;
  private readonly releasedPromise = new Promise<void>((resolve) => (this.markReleased = resolve));

  /** Registers `t` to be disposed with the request; returns it. */
  own<T extends NativeTensor>(t: T): T {
    if (this.releaseRequested) {
      t.dispose();
      throw new Error('request state already released');
    }
    this.owned.add(t);
    return t;
  }

  /**
   * Registers `cb` to run when the request's resources are freed (with the owned tensors, after in-flight native
   * work settles) — e.g. releasing a cache handle whose tensor the request borrows but does not own. When the
   * state is already released, runs `cb` at once and throws, like `own`.
   */
  onRelease(cb: () => void): void {
    if (this.releaseRequested) {
      cb();
      throw new Error('request state already released');
    }
    this.releaseCallbacks.push(cb);
  }

  /** Disposes `t` now and forgets it. */
  free(t: NativeTensor | undefined): void {
    if (t === undefined) return;
    this.owned.delete(t);
    t.dispose();
  }

  /** Tracks native work so release waits for it; returns the same promise. */
  track<T>(p: Promise<T>): Promise<T> {
    this.inflight.add(p);
    const done = (): void => {
      this.inflight.delete(p);
      if (this.releaseRequested && this.inflight.size === 0) this.disposeAll();
    };
    p.then(done, done);
    return p;
  }

  /** Frees everything the request owns, now or when its in-flight native work settles. Idempotent. */
  release(): void {
    if (this.releaseRequested) return;
    this.releaseRequested = true;
    if (this.inflight.size === 0) this.disposeAll();
  }

  get released(): boolean {
    return this.releaseRequested;
  }

  /** Resolves once `release()` has been asked for and every owned tensor is disposed (in-flight work settled). */
  whenReleased(): Promise<void> {
    return this.releasedPromise;
  }

  private disposeAll(): void {
    for (const t of this.owned) t.dispose();
    this.owned.clear();
    const cbs = this.releaseCallbacks.splice(0);
    for (const cb of cbs) cb();
    this.markReleased();
  }
}
