import { Observable, Subscription, type MonoTypeOperatorFunction } from 'rxjs';

/**
 * Flush (docs/design.md §5): mirrors the source, and every value of `signal$` drops the current subscription to the
 * source and subscribes to it again. What the dropped subscription emitted stays emitted; what it would have emitted
 * later never appears. Use it on a cold, deferred unit of work (one chunk of a rollout) so that a flush discards the
 * stale work in flight and redoes it from its start — with whatever fresh inputs the deferred factory reads.
 *
 * Intuition: `switchMap` over `signal$` that also completes when the current attempt completes.
 *
 * ```
 * source:  --a--b|        (each subscription: a at 2, b at 5, complete at 6)
 * signal:  ----s------
 * result:  --a---a--b|    (the first attempt is dropped at 4 before b; the second starts at 4)
 * ```
 *
 * `signal$` is subscribed only while the result is, and only values arriving while an attempt runs restart it.
 * Completion and errors of the current attempt are forwarded; errors of `signal$` are forwarded too.
 */
export function restartOn<T>(signal$: Observable<unknown>): MonoTypeOperatorFunction<T> {
  return (source) =>
    new Observable<T>((subscriber) => {
      let attempt: Subscription | undefined;
      const start = (): void => {
        attempt?.unsubscribe();
        attempt = source.subscribe({
          next: (v) => subscriber.next(v),
          error: (err) => subscriber.error(err),
          complete: () => subscriber.complete(),
        });
      };
      start();
      const signals = subscriber.closed ? undefined : signal$.subscribe({ next: () => start(), error: (err) => subscriber.error(err) });
      return () => {
        signals?.unsubscribe();
        attempt?.unsubscribe();
      };
    });
}
