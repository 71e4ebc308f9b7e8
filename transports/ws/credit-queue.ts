/**
 * The per-socket credit ledger of a stream: the client grants credits (one per frame it appended or decoded), and a
 * frame is released to the encoder only while a credit is left, so at most the granted number of frames are in
 * flight to the client. Frames that arrive without a credit wait here; their producer is bounded elsewhere (a
 * generation's frames are already in memory as one artifact; a world session makes a chunk only once the same
 * credits reached it).
 */
export class CreditQueue<T> {
  private credits = 0;
  private readonly waiting: T[] = [];

  /**
   * @param maxCredits Most credits the client may hold unspent (frames); a grant beyond it is refused.
   * @param release Called with each frame in order as soon as it has a credit.
   */
  constructor(
    private readonly maxCredits: number,
    private readonly release: (item: T) => void,
  ) {}

  /** Credits granted and not yet spent, frames. */
  get balance(): number {
    return this.credits;
  }

  /** Frames waiting for a credit. */
  get pending(): number {
    return this.waiting.length;
  }

  /**
   * Adds `frames` credits and releases waiting frames.
   * @throws RangeError when `frames` is not a positive safe integer or the balance would exceed `maxCredits`
   *   (nothing is granted then).
   */
  grant(frames: number): void {
    if (!Number.isSafeInteger(frames) || frames < 1) throw new RangeError(`a grant must be a positive integer of frames; got ${String(frames)}`);
    if (this.credits + frames > this.maxCredits) {
      throw new RangeError(`granting ${frames} frame(s) on top of ${this.credits} unspent would exceed the ${this.maxCredits} credits a client may hold`);
    }
    this.credits += frames;
    this.pump();
  }

  /** Queues a frame; it is released at once when a credit is left. */
  push(item: T): void {
    this.waiting.push(item);
    this.pump();
  }

  /** Drops the waiting frames (the stream ended or was cancelled). */
  clear(): void {
    this.waiting.length = 0;
  }

  private pump(): void {
    while (this.credits > 0 && this.waiting.length > 0) {
      this.credits--;
      this.release(this.waiting.shift()!);
    }
  }
}
