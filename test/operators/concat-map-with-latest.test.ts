import { Subject } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { concatMapWithLatest } from '../../operators';

function scheduler(): TestScheduler {
  return new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
}

describe('concatMapWithLatest', () => {
  it('samples the latest value when each inner starts (marble from the docstring)', () => {
    scheduler().run(({ cold, hot, expectObservable }) => {
      const source = hot('a-b------|');
      const latest = hot('-x-------');
      const out = source.pipe(concatMapWithLatest(latest, 'i', (_v, action) => cold('---(r|)', { r: action })));
      expectObservable(out).toBe('---i--x--|');
    });
  });

  it('an action arriving mid-chunk applies from the next chunk, never to the running one', () => {
    scheduler().run(({ cold, hot, expectObservable }) => {
      // Four chunks of 4 frames back to back; actions change at 1 (during chunk a) and 6 (during chunk b).
      const permits = hot('(abcd)----------------|');
      const actions = hot('-u----l---------------', { u: 'up', l: 'left' });
      const out = permits.pipe(concatMapWithLatest(actions, 'none', (p, action) => cold('----(r|)', { r: `${p}:${action}` })));
      expectObservable(out).toBe('----x---y---z---w-----|', { x: 'a:none', y: 'b:up', z: 'c:left', w: 'd:left' });
    });
  });

  it('restart$ drops the running inner and redoes it with the then-latest value (flush)', () => {
    scheduler().run(({ cold, hot, expectObservable }) => {
      const permits = hot('(ab)----------------|');
      const actions = hot('-l------------------', { l: 'left' });
      const flush = hot('---f----------------');
      // Each chunk: a step event 2 frames after it starts, its frames 2 later. Chunk a starts at 0 with 'none'
      // (the action arrives at 1); the flush at 3 drops it after its step event and before its frames, and redoes it
      // from 3 with 'left'; b follows at 7.
      const out = permits.pipe(
        concatMapWithLatest(actions, 'none', (p, action) => cold('--s-(f|)', { s: `${p}.step:${action}`, f: `${p}.frames:${action}` }), { restart$: flush }),
      );
      expectObservable(out).toBe('--s--t-u-w-x--------|', {
        s: 'a.step:none',
        t: 'a.step:left',
        u: 'a.frames:left',
        w: 'b.step:left',
        x: 'b.frames:left',
      });
    });
  });

  it('forwards errors of latest$ and unsubscribes it with the result', () => {
    scheduler().run(({ cold, hot, expectObservable, expectSubscriptions }) => {
      const latest = hot('--#');
      expectObservable(cold('a----').pipe(concatMapWithLatest(latest, '0', () => cold('-----r')))).toBe('--#');
      const quiet = hot('-----');
      expectObservable(cold('a').pipe(concatMapWithLatest(quiet, '0', () => cold('-r'))), '---!').toBe('-r');
      expectSubscriptions(quiet.subscriptions).toBe('^--!');
    });
  });

  it('reads the latest value synchronously at start (a Subject outside virtual time)', () => {
    const actions = new Subject<string>();
    const permits = new Subject<number>();
    const seen: string[] = [];
    const sub = permits.pipe(concatMapWithLatest(actions, 'none', (p, a) => [`${p}:${a}`])).subscribe((v) => seen.push(v));
    permits.next(0);
    actions.next('up');
    permits.next(1);
    actions.complete(); // the last value stays
    permits.next(2);
    sub.unsubscribe();
    expect(seen).toEqual(['0:none', '1:up', '2:up']);
  });
});
