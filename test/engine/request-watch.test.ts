import { Subject, take, toArray, firstValueFrom, of } from 'rxjs';
import { watchRequests, type RequestWatch, type RequestWatcher } from '../../src/engine/request-watch';
import type { OmniEvent } from '../../src/request/omni-event';

const queued: OmniEvent = { type: 'queued', requestId: 'r', position: 0 };
const final: OmniEvent = { type: 'final', requestId: 'r', output: { requestId: 'r', artifacts: {}, seed: 1, ms: 1 } };

/** A watcher recording what each of its watches saw. */
function recorder(): { watcher: RequestWatcher; seen: string[][] } {
  const seen: string[][] = [];
  return {
    seen,
    watcher: () => {
      const mine: string[] = [];
      seen.push(mine);
      return { event: (ev) => mine.push(ev.type), cancelled: () => mine.push('cancelled') };
    },
  };
}

describe('watchRequests', () => {
  it('shows each subscription its events, and no cancel once the request ended', async () => {
    const r = recorder();
    const events = await firstValueFrom(of(queued, final).pipe(watchRequests(new Set([r.watcher])), toArray()));
    expect(events.map((e) => e.type)).toEqual(['queued', 'final']);
    expect(r.seen).toEqual([['queued', 'final']]);
  });

  it('reports a cancel when the consumer unsubscribes before the end, with per-subscription state', () => {
    const r = recorder();
    const source = new Subject<OmniEvent>();
    const watched = source.pipe(watchRequests(new Set([r.watcher])));
    const a = watched.subscribe();
    const b = watched.pipe(take(1)).subscribe();
    source.next(queued);
    a.unsubscribe();
    expect(r.seen).toEqual([
      ['queued', 'cancelled'],
      ['queued', 'cancelled'],
    ]);
    expect(b.closed).toBe(true);
  });

  it('a watcher that throws is dropped for that request; the request and other watchers go on', async () => {
    const r = recorder();
    const bad: RequestWatcher = (): RequestWatch => ({
      event: () => {
        throw new Error('metrics bug');
      },
      cancelled: () => undefined,
    });
    const events = await firstValueFrom(of(queued, final).pipe(watchRequests(new Set([bad, r.watcher])), toArray()));
    expect(events).toHaveLength(2);
    expect(r.seen).toEqual([['queued', 'final']]);
  });

  it('a watcher registered after subscribe does not see that request', () => {
    const watchers = new Set<RequestWatcher>();
    const source = new Subject<OmniEvent>();
    source.pipe(watchRequests(watchers)).subscribe();
    const r = recorder();
    watchers.add(r.watcher);
    source.next(queued);
    expect(r.seen).toEqual([]);
  });
});
