import type { OmniError } from '../../errors';

/**
 * The sender side of credit flow control: credits granted by the receiver, and the puts waiting for one, served
 * first come first served. A connection loss voids the credits of that connection (`reset`); the waiting puts
 * keep waiting for the next connection's grant.
 */
export class CreditWindow {
  #credits = 0;
  readonly #waiters: Array<{ resolve(): void; reject(e: unknown): void }> = [];
  #closedWith: OmniError | null = null;

  get credits(): number {
    return this.#credits;
  }

  /** Adds `n` credits (a non-negative integer) and wakes that many waiting puts. */
  grant(n: number): void {
    this.#credits += n;
    while (this.#credits > 0 && this.#waiters.length > 0) {
      this.#credits--;
      this.#waiters.shift()!.resolve();
    }
  }

  /** Spends one credit, waiting for one if none is left. @throws the close error once closed. */
  acquire(): Promise<void> {
    if (this.#closedWith !== null) return Promise.reject(this.#closedWith);
    if (this.#credits > 0 && this.#waiters.length === 0) {
      this.#credits--;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /** Voids the unspent credits (their connection is gone). */
  reset(): void {
    this.#credits = 0;
  }

  /** Rejects every waiting and future `acquire` with `error`. Idempotent. */
  close(error: OmniError): void {
    if (this.#closedWith !== null) return;
    this.#closedWith = error;
    this.#credits = 0;
    for (const w of this.#waiters.splice(0)) w.reject(error);
  }
}
