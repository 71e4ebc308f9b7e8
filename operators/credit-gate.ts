import { Observable, type OperatorFunction } from 'rxjs';

/**
 * Credit gating (docs/design.md §5): turns a stream of credit grants from a consumer into permits for a producer. The
 * consumer grants credits (one per item it is ready to take — e.g. one per video frame it can send); every time
 * `cost` credits have accumulated, one permit is emitted and `cost` credits are spent. Permits are numbered 0, 1, 2…
 * A producer that starts a unit of work only per permit (`permits$.pipe(concatMap(work))`) never runs ahead of its
 * consumer by more than the credits granted, so nothing is buffered without bound when the consumer is slow.
 *
 * Intuition: a token bucket refilled by the consumer instead of a clock.
 *
 * ```
 * credits: -1-1-2---2-|        (cost 2)
 * permits: ---0-1---2-|
 * ```
 *
 * Credits left over when the source completes are dropped. A grant that is not a non-negative safe integer is a
 * consumer bug: the output errors with a RangeError naming the value (validate untrusted grants before this).
 *
 * @param cost Credits per permit (e.g. frames per chunk); a positive safe integer.
 * @throws RangeError (synchronously) when `cost` is not a positive safe integer.
 */
export function creditGate(cost: number): OperatorFunction<number, number> {
  if (!Number.isSafeInteger(cost) || cost < 1) throw new RangeError(`creditGate: cost must be a positive integer, got ${cost}`);
  return (credits$) =>
    new Observable<number>((subscriber) => {
      let balance = 0;
      let next = 0;
      return credits$.subscribe({
        next: (grant) => {
          if (!Number.isSafeInteger(grant) || grant < 0) {
            subscriber.error(new RangeError(`creditGate: a credit grant must be a non-negative integer, got ${String(grant)}`));
            return;
          }
          balance += grant;
          while (balance >= cost && !subscriber.closed) {
            balance -= cost;
            subscriber.next(next++);
          }
        },
        error: (err) => subscriber.error(err),
        complete: () => subscriber.complete(),
      });
    });
}
