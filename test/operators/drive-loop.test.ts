import { Observable, of, throwError, type Subscription } from 'rxjs';
import { take } from 'rxjs/operators';
import { TestScheduler } from 'rxjs/testing';
import { driveLoop, type ReleaseReason } from '../../operators';

interface Out {
  done: boolean;
  i: number;
}

function scheduler(): TestScheduler {
  return new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
}

describe('driveLoop', () => {
  it('runs one step after another and completes after the done step (marble from the docstring)', () => {
    const released: ReleaseReason[] = [];
    scheduler().run(({ cold, expectObservable }) => {
      const result = driveLoop<{ n: number }, Out>({
        init: () => cold('a|', { a: { n: 0 } }),
        step: (loop) => {
          loop.n += 1;
          return cold('---r|', { r: { done: loop.n === 3, i: loop.n } });
        },
        release: (_l, why) => released.push(why),
      });
      expectObservable(result).toBe('---a--b--(c|)', { a: { done: false, i: 1 }, b: { done: false, i: 2 }, c: { done: true, i: 3 } });
    });
    expect(released).toEqual(['complete']);
  });

  it('a short loop and a long loop driven concurrently interleave by their own step times', () => {
    scheduler().run(({ cold, expectObservable }) => {
      const make = (steps: number, frames: string) =>
        driveLoop<{ n: number }, Out>({
          init: () => of({ n: 0 }),
          step: (l) => {
            l.n += 1;
            return cold(frames, { r: { done: l.n === steps, i: l.n } });
          },
        });
      expectObservable(make(2, '-r|')).toBe('-a(b|)', { a: { done: false, i: 1 }, b: { done: true, i: 2 } });
      expectObservable(make(3, '--r|')).toBe('--a-b-(c|)', { a: { done: false, i: 1 }, b: { done: false, i: 2 }, c: { done: true, i: 3 } });
    });
  });

  it('runs finalize after the done step and before completion', () => {
    scheduler().run(({ cold, expectObservable, expectSubscriptions }) => {
      const fin = cold('--f|');
      const result = driveLoop<number, Out>({
        init: () => of(0),
        step: () => cold('-r|', { r: { done: true, i: 1 } }),
        finalize: () => fin,
      });
      expectObservable(result).toBe('-a-|', { a: { done: true, i: 1 } });
      expectSubscriptions(fin.subscriptions).toBe('-^-!');
    });
  });

  it('unsubscribing stops at the step boundary: no further step starts and release runs once', () => {
    scheduler().run(({ cold, expectObservable, expectSubscriptions, flush }) => {
      const steps: Array<ReturnType<typeof cold>> = [];
      const released: ReleaseReason[] = [];
      const result = driveLoop<number, Out>({
        init: () => of(0),
        step: () => {
          const s = cold('---r|', { r: { done: false, i: steps.length + 1 } });
          steps.push(s);
          return s;
        },
        release: (_l, why) => released.push(why),
      });
      expectObservable(result, '^-----!').toBe('---a--', { a: { done: false, i: 1 } });
      flush();
      expect(steps).toHaveLength(2);
      expectSubscriptions(steps[0].subscriptions).toBe('^--!');
      expectSubscriptions(steps[1].subscriptions).toBe('---^--!');
      expect(released).toEqual(['unsubscribe']);
    });
  });

  it('forwards a step error after releasing with reason "error"', () => {
    scheduler().run(({ cold, expectObservable, flush }) => {
      const released: ReleaseReason[] = [];
      let n = 0;
      const result = driveLoop<number, Out>({
        init: () => of(0),
        step: () => (++n === 2 ? cold('-#', undefined, new Error('boom')) : cold('-r|', { r: { done: false, i: n } })),
        release: (_l, why) => released.push(why),
      });
      expectObservable(result).toBe('-a#', { a: { done: false, i: 1 } }, new Error('boom'));
      flush();
      expect(released).toEqual(['error']);
    });
  });

  it('an error thrown synchronously by init or step becomes a stream error', () => {
    scheduler().run(({ expectObservable }) => {
      expectObservable(
        driveLoop<number, Out>({
          init: () => {
            throw new Error('init');
          },
          step: () => of({ done: true, i: 0 }),
        }),
      ).toBe('#', undefined, new Error('init'));
      expectObservable(
        driveLoop<number, Out>({
          init: () => of(0),
          step: () => {
            throw new Error('step');
          },
        }),
      ).toBe('#', undefined, new Error('step'));
      expectObservable(driveLoop<number, Out>({ init: () => throwError(() => new Error('async init')), step: () => of({ done: true, i: 0 }) })).toBe(
        '#',
        undefined,
        new Error('async init'),
      );
    });
  });

  it('a step that completes without an outcome is an error (never a hang)', () => {
    scheduler().run(({ cold, expectObservable }) => {
      const result = driveLoop<number, Out>({ init: () => of(0), step: () => cold('--|') });
      expectObservable(result).toBe('--#', undefined, new Error('driveLoop: a loop callback completed without producing a value'));
    });
  });

  it('empty init (never produces a loop) errors; never init never steps', () => {
    scheduler().run(({ cold, expectObservable }) => {
      let stepped = false;
      expectObservable(driveLoop<number, Out>({ init: () => cold('|'), step: () => of({ done: true, i: 0 }) })).toBe(
        '#',
        undefined,
        new Error('driveLoop: a loop callback completed without producing a value'),
      );
      expectObservable(
        driveLoop<number, Out>({
          init: () => cold('-'),
          step: () => {
            stepped = true;
            return of({ done: true, i: 0 });
          },
        }),
      ).toBe('--');
      expect(stepped).toBe(false);
    });
  });

  it('only the first value of a step counts; the step is unsubscribed after it', () => {
    scheduler().run(({ cold, expectObservable, expectSubscriptions }) => {
      const s = cold('-ab|', { a: { done: true, i: 1 }, b: { done: true, i: 2 } });
      expectObservable(driveLoop<number, Out>({ init: () => of(0), step: () => s })).toBe('-(a|)', { a: { done: true, i: 1 } });
      expectSubscriptions(s.subscriptions).toBe('^!');
    });
  });

  it('unsubscription chains through downstream operators (take)', () => {
    scheduler().run(({ cold, expectObservable, flush }) => {
      const released: ReleaseReason[] = [];
      let n = 0;
      const result = driveLoop<number, Out>({
        init: () => of(0),
        step: () => cold('-r|', { r: { done: false, i: ++n } }),
        release: (_l, why) => released.push(why),
      }).pipe(take(2));
      expectObservable(result).toBe('-a(b|)', { a: { done: false, i: 1 }, b: { done: false, i: 2 } });
      flush();
      expect(released).toEqual(['unsubscribe']);
      expect(n).toBe(2);
    });
  });

  it('trampolines synchronous steps: 100 000 steps run in constant stack', () => {
    const out: number[] = [];
    driveLoop<{ n: number }, Out>({ init: () => of({ n: 0 }), step: (l) => of({ done: ++l.n === 100_000, i: l.n }) }).subscribe((o) => {
      if (o.i % 25_000 === 0) out.push(o.i);
    });
    expect(out).toEqual([25_000, 50_000, 75_000, 100_000]);
  });

  it('with a promise step in flight, unsubscribe drops its result and releases only after it settles', async () => {
    let resolveStep!: (o: Out) => void;
    const released: ReleaseReason[] = [];
    const seen: Out[] = [];
    let started = 0;
    const sub: Subscription = driveLoop<number, Out>({
      init: () => Promise.resolve(0),
      step: () => {
        started += 1;
        return new Promise<Out>((r) => (resolveStep = r));
      },
      release: (_l, why) => released.push(why),
    }).subscribe((o) => seen.push(o));
    await Promise.resolve();
    await Promise.resolve();
    expect(started).toBe(1);
    sub.unsubscribe();
    expect(released).toEqual([]); // the step's native work is still running
    resolveStep({ done: false, i: 1 });
    await new Promise((r) => setImmediate(r));
    expect(released).toEqual(['unsubscribe']);
    expect(seen).toEqual([]);
    expect(started).toBe(1);
  });

  it('each subscription is independent (cold): init runs per subscriber', () => {
    let inits = 0;
    const loop$ = driveLoop<number, Out>({ init: () => of(++inits), step: (l) => of({ done: true, i: l }) });
    const a: Out[] = [];
    loop$.subscribe((o) => a.push(o));
    loop$.subscribe((o) => a.push(o));
    expect(a).toEqual([
      { done: true, i: 1 },
      { done: true, i: 2 },
    ]);
  });

  it('accepts a hand-written Observable step and tears it down', () => {
    let torn = 0;
    const step = () =>
      new Observable<Out>((s) => {
        s.next({ done: true, i: 7 });
        return () => {
          torn += 1;
        };
      });
    const got: Out[] = [];
    driveLoop<number, Out>({ init: () => of(0), step }).subscribe((o) => got.push(o));
    expect(got).toEqual([{ done: true, i: 7 }]);
    expect(torn).toBe(1);
  });
});
