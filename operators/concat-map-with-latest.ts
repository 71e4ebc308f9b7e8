import { defer, Observable, Subscription, concatMap, type ObservableInput, type OperatorFunction } from 'rxjs';
import { restartOn } from './restart-on';

/** Options of `concatMapWithLatest`. */
export interface ConcatMapWithLatestOptions {
  /**
   * While an inner is running, each value of `restart$` drops it (its output so far stays; nothing more of it is
   * emitted) and starts it again from `project`, with the latest value at that moment (see `restartOn`).
   */
  restart$?: Observable<unknown>;
}

/**
 * Latest-value sampling at unit boundaries (docs/design.md §5): like `concatMap`, but `project` also receives the latest
 * value of `latest$` AT THE MOMENT THE INNER STARTS — not when the source value arrived. For a chunked rollout,
 * the source is the chunk permits, `latest$` the user's actions, and each chunk is generated with the action that
 * was current when the chunk began: an action arriving mid-chunk applies from the next chunk.
 *
 * Intuition: `concatMap` + `withLatestFrom`, where the "with latest" is read when the queued work begins.
 *
 * ```
 * source:  a-b------|
 * latest:  -x-------             (initial value i)
 * inner:   ---(r|)               (each inner takes 3 frames and emits the action it was given)
 * result:  ---i--x--|            (a started at 0, before x; b, queued at 2, starts at 3 and sees x)
 * ```
 *
 * With `options.restart$`, a value of `restart$` during an inner drops that inner and starts it again with the
 * then-latest value (a "flush": stale work is discarded and redone with the new input).
 *
 * `latest$` is subscribed before the source and for as long as the result is; its errors are forwarded, its
 * completion keeps the last value. Values of `latest$` never start work by themselves.
 *
 * @param initial Value used until `latest$` emits.
 */
export function concatMapWithLatest<T, A, R>(
  latest$: Observable<A>,
  initial: A,
  project: (value: T, latest: A, index: number) => ObservableInput<R>,
  options: ConcatMapWithLatestOptions = {},
): OperatorFunction<T, R> {
  return (source) =>
    new Observable<R>((subscriber) => {
      let current = initial;
      const subs = new Subscription();
      subs.add(latest$.subscribe({ next: (v) => (current = v), error: (err) => subscriber.error(err) }));
      const inner = (value: T, index: number): Observable<R> => {
        const run = defer(() => project(value, current, index));
        return options.restart$ === undefined ? run : run.pipe(restartOn(options.restart$));
      };
      subs.add(source.pipe(concatMap(inner)).subscribe(subscriber));
      return subs;
    });
}
