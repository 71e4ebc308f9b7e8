import { Observable, type MonoTypeOperatorFunction } from 'rxjs';
import type { OmniEvent } from '../request/omni-event';

/**
 * What watches one request (one subscription of `Engine.generate`): every event the consumer gets, just before it
 * gets it, then `cancelled` when the consumer unsubscribed before the request's `final` or `error` event.
 */
export interface RequestWatch {
  event(ev: OmniEvent): void;
  cancelled(): void;
}

/** Called once per `generate` subscription, when it is subscribed; returns what watches that request. */
export type RequestWatcher = () => RequestWatch;

/**
 * Shows each subscription's events to the watchers registered when it was subscribed (`Engine.watchRequests`),
 * without changing the stream. A watcher that throws is ignored for that request from then on: metrics must never
 * fail a request.
 */
export function watchRequests(watchers: ReadonlySet<RequestWatcher>): MonoTypeOperatorFunction<OmniEvent> {
  return (source) =>
    new Observable<OmniEvent>((subscriber) => {
      if (watchers.size === 0) return source.subscribe(subscriber);
      const watches = new Set<RequestWatch>();
      for (const w of watchers) {
        try {
          watches.add(w());
        } catch {
          // a watcher that cannot start watches nothing
        }
      }
      const tell = (f: (w: RequestWatch) => void) => {
        for (const w of watches) {
          try {
            f(w);
          } catch {
            watches.delete(w);
          }
        }
      };
      let ended = false;
      const inner = source.subscribe({
        next: (ev) => {
          if (ev.type === 'final' || ev.type === 'error') ended = true;
          tell((w) => w.event(ev));
          subscriber.next(ev);
        },
        error: (err: unknown) => {
          ended = true;
          subscriber.error(err);
        },
        complete: () => {
          ended = true;
          subscriber.complete();
        },
      });
      return () => {
        inner.unsubscribe();
        if (!ended) tell((w) => w.cancelled());
        watches.clear();
      };
    });
}
