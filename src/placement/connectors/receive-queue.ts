import { Observable } from 'rxjs';
import type { DiffusionStagePayload } from '../../pipeline/stage-payload';
import { connectorClosed, isConnectorClosed } from './stage-connector';

interface Waiter {
  resolve(p: DiffusionStagePayload): void;
  reject(e: unknown): void;
}

/**
 * The receiver side of every connector: accepted payloads in arrival order, each with the callback that returns
 * its credit to its sender. A payload is taken by a pending `get` at once, else queued; taking it calls its
 * `release`. The queue holds at most what the senders had credit for, so it needs no bound of its own.
 */
export class ReceiveQueue {
  readonly #what: string;
  readonly #items: Array<{ payload: DiffusionStagePayload; release: () => void }> = [];
  readonly #waiters: Waiter[] = [];
  #closed = false;

  /** @param what the connector end, for error messages (e.g. "tcp receiver 127.0.0.1:7001"). */
  constructor(what: string) {
    this.#what = what;
  }

  get length(): number {
    return this.#items.length;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Adds an accepted payload. @throws OmniError OMNIRX_ERR_CONNECTOR once closed. */
  accept(payload: DiffusionStagePayload, release: () => void): void {
    if (this.#closed) throw connectorClosed(this.#what);
    const w = this.#waiters.shift();
    if (w === undefined) {
      this.#items.push({ payload, release });
      return;
    }
    release();
    w.resolve(payload);
  }

  get(): Promise<DiffusionStagePayload> {
    return new Promise((resolve, reject) => this.#take({ resolve, reject }));
  }

  readonly payloads$ = new Observable<DiffusionStagePayload>((subscriber) => {
    let cancel = () => {};
    const pull = (): void => {
      while (!subscriber.closed) {
        const item = this.#items.shift();
        if (item === undefined) break;
        item.release();
        subscriber.next(item.payload);
      }
      if (subscriber.closed) return;
      cancel = this.#take({
        resolve: (p) => {
          subscriber.next(p);
          pull();
        },
        reject: (e) => (isConnectorClosed(e) ? subscriber.complete() : subscriber.error(e)),
      });
    };
    pull();
    return () => cancel();
  });

  /** Drops queued payloads and rejects pending takers. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#items.length = 0;
    for (const w of this.#waiters.splice(0)) w.reject(connectorClosed(this.#what));
  }

  /** Hands the next payload to `w` (now, or when one arrives). @returns a function that withdraws `w` if still waiting. */
  #take(w: Waiter): () => void {
    if (this.#closed) {
      w.reject(connectorClosed(this.#what));
      return () => {};
    }
    const item = this.#items.shift();
    if (item !== undefined) {
      item.release();
      w.resolve(item.payload);
      return () => {};
    }
    this.#waiters.push(w);
    return () => {
      const i = this.#waiters.indexOf(w);
      if (i >= 0) this.#waiters.splice(i, 1);
    };
  }
}
