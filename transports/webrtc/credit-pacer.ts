/** Options of {@link CreditPacer}. */
export interface CreditPacerOptions {
  /** Frames granted but not yet sent, at most (the pacing window): ≥ 1. */
  windowFrames: number;
  /** Shortest spacing between two grants, ms (1000 / fps keeps the rollout at or below real time); 0 for none. */
  minIntervalMs: number;
  /** Grants `n` credits (frames) to the session. */
  grant: (n: number) => void;
}

/**
 * Paces a world session by credits: it grants `windowFrames` credits at `start()`, then one more each time a frame
 * went out (`frameSent()`), never two grants closer than `minIntervalMs`. So at most `windowFrames` frames are ever
 * generated ahead of what the viewer was sent, and the rollout samples its action as late as possible.
 */
export class CreditPacer {
  private owed = 0;
  private inFlight = 0;
  private lastGrantAt = Number.NEGATIVE_INFINITY;
  /** An action asked for the next credit without the spacing (set by `expedite`, cleared by the next grant). */
  private expedited = false;
  private timer?: NodeJS.Timeout;
  private stopped = false;

  constructor(private readonly options: CreditPacerOptions) {
    if (!Number.isSafeInteger(options.windowFrames) || options.windowFrames < 1)
      throw new RangeError(`CreditPacer: windowFrames must be a positive integer, got ${options.windowFrames}`);
  }

  /** Frames granted and not yet sent. */
  get framesInFlight(): number {
    return this.inFlight;
  }

  /** Grants the first window. */
  start(): void {
    this.owed += this.options.windowFrames;
    this.pump();
  }

  /** One frame went out to the viewer: its credit comes back (after the spacing, if any). */
  frameSent(): void {
    if (this.inFlight > 0) this.inFlight--;
    this.owed++;
    this.pump();
  }

  /**
   * Grants the next credit without waiting for the spacing: called when an action arrives, so the chunk that will
   * carry it starts at once rather than at the next frame slot. When a credit is owed it is granted now; when the
   * whole window is in flight (the action came while a frame was being made or encoded), the credit that frame
   * returns is granted the moment it is sent. Never exceeds the window; several actions before that grant expedite it
   * once.
   */
  expedite(): void {
    if (this.stopped) return;
    this.expedited = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pump();
  }

  /** Stops granting (pending grants are dropped). Idempotent. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private pump(): void {
    if (this.stopped || this.timer !== undefined || this.owed === 0) return;
    const wait = this.expedited ? 0 : this.lastGrantAt + this.options.minIntervalMs - performance.now();
    if (wait > 0) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.pump();
      }, wait);
      return;
    }
    // With spacing, one credit per grant; without, everything owed at once.
    const n = this.options.minIntervalMs > 0 ? 1 : this.owed;
    this.owed -= n;
    this.inFlight += n;
    this.lastGrantAt = performance.now();
    this.expedited = false;
    this.options.grant(n);
    this.pump();
  }
}
