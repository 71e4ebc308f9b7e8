import { concatMap, firstValueFrom, of, timer, type Observable, type ObservableInput, type SchedulerAction, type SchedulerLike, type Subscription } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { driveLoop } from '../../../operators';
import { OmniError } from '../../../src/errors';
import { CostModel, StepScheduler, type ScheduleDecision } from '../../../src/executor/scheduler';
import type { BatchRunner, StepCost } from '../../../src/pipeline/step-grants';

/** One frame of virtual time is one millisecond; every step below takes a fixed number of frames (a fake executor). */
const VIDEO: StepCost = { model: 'wan', phase: 'denoise', shape: '720p', guidance: 'cfg' };
const IMAGE: StepCost = { model: 'wan', phase: 'denoise', shape: '256px', guidance: 'cfg' };

interface Out {
  done: boolean;
  i: number;
}

function testScheduler(): TestScheduler {
  return new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
}

/** Subscribes to `source` at `frame` (virtual time inside `run`). */
function at<T>(frame: number, source: Observable<T>): Observable<T> {
  return timer(frame).pipe(concatMap(() => source));
}

/**
 * How the engine will use the scheduler: `driveLoop` owns iteration and each step asks the pool for permission —
 * `step` returns `pool.step(...)`, whose `run` is the fake executor (`run(i)` is the i-th step, 1-based).
 */
function denoiseLoop(
  pool: StepScheduler,
  opts: {
    id: string;
    steps: number;
    run: (i: number, last: boolean) => ObservableInput<Out>;
    priority?: number;
    cost?: StepCost;
    /** Makes every step batchable; its item is the step's expected outcome. */
    batch?: { key: string; runner: BatchRunner };
    forgetOnRelease?: boolean;
  },
): Observable<Out> {
  return driveLoop<{ n: number }, Out>({
    init: () => of({ n: 0 }),
    step: (loop) => {
      const i = ++loop.n;
      const last = i === opts.steps;
      return pool.step({
        requestId: opts.id,
        priority: opts.priority ?? 0,
        cost: opts.cost ?? VIDEO,
        run: () => opts.run(i, last),
        ...(opts.batch !== undefined ? { batch: { ...opts.batch, item: out(i, last) } } : {}),
      });
    },
    release: () => {
      if (opts.forgetOnRelease) pool.forget(opts.id);
    },
  });
}

const out = (i: number, done = false): Out => ({ done, i });
const decision = (d: ScheduleDecision): ScheduleDecision => d;

describe('StepScheduler', () => {
  describe('interleaving (least attained service)', () => {
    it('runs a short job submitted while a long one runs between the long one’s steps (marble from the docstring)', () => {
      const costs = new CostModel({ defaultMs: 1 });
      const pool = new StepScheduler({ costModel: costs });
      testScheduler().run(({ cold, expectObservable }) => {
        const long = denoiseLoop(pool, { id: 'long', steps: 6, cost: VIDEO, run: (i, last) => cold('---(r|)', { r: out(i, last) }) });
        const short = denoiseLoop(pool, { id: 'short', steps: 2, cost: IMAGE, run: (i, last) => cold('--(r|)', { r: out(i, last) }) });
        const L = (t: number, predictedMs: number) => decision({ at: t, requestIds: ['long'], predictedMs, reason: 'fifo' });
        expectObservable(pool.decisions$).toBe('a--b-c-d--e--f--g--h', {
          a: L(0, 1),
          b: decision({ at: 3, requestIds: ['short'], predictedMs: 1, reason: 'fifo' }), // it arrived (frame 1) before long's 2nd step (frame 3)
          c: decision({ at: 5, requestIds: ['short'], predictedMs: 2, reason: 'least-attained-service' }), // 2 ms of service < 3 ms
          d: L(7, 3),
          e: L(10, 3),
          f: L(13, 3),
          g: L(16, 3),
          h: L(19, 3),
        });
        expectObservable(long).toBe('---a------b--c--d--e--(f|)', { a: out(1), b: out(2), c: out(3), d: out(4), e: out(5), f: out(6, true) });
        expectObservable(at(1, short)).toBe('-----a-(b|)', { a: out(1), b: out(2, true) });
      });
      expect(pool.attained('long')).toBe(18);
      expect(pool.attained('short')).toBe(4);
      expect(pool.stats()).toEqual({ ready: 0, inFlight: 0, granted: 8 });
    });

    it('two driveLoop-driven loops of equal step cost alternate step by step (round robin falls out of LAS + FIFO)', () => {
      const pool = new StepScheduler();
      testScheduler().run(({ cold, expectObservable }) => {
        const a = denoiseLoop(pool, { id: 'a', steps: 3, run: (i, last) => cold('--(r|)', { r: out(i, last) }), forgetOnRelease: true });
        const b = denoiseLoop(pool, { id: 'b', steps: 3, run: (i, last) => cold('--(r|)', { r: out(i, last) }), forgetOnRelease: true });
        expectObservable(a).toBe('--a---b---(c|)', { a: out(1), b: out(2), c: out(3, true) });
        expectObservable(b).toBe('----a---b---(c|)', { a: out(1), b: out(2), c: out(3, true) });
      });
      // released loops forgot their accounting
      expect(pool.attained('a')).toBe(0);
      expect(pool.attained('b')).toBe(0);
    });
  });

  describe('priority', () => {
    it('a higher-priority request arriving later goes first at the next step boundary', () => {
      const pool = new StepScheduler({ costModel: new CostModel({ defaultMs: 1 }) });
      testScheduler().run(({ cold, expectObservable, expectSubscriptions }) => {
        const long = denoiseLoop(pool, { id: 'long', steps: 3, run: (i, last) => cold('---(r|)', { r: out(i, last) }) });
        const normalRun = cold('--(n|)', { n: out(1, true) });
        const highRun = cold('--(h|)', { h: out(1, true) });
        const normal = pool.step({ requestId: 'normal', priority: 0, cost: IMAGE, run: () => normalRun });
        const high = pool.step({ requestId: 'high', priority: 5, cost: IMAGE, run: () => highRun });
        expectObservable(pool.decisions$).toBe('a--b-c-d--e', {
          a: decision({ at: 0, requestIds: ['long'], predictedMs: 1, reason: 'fifo' }),
          b: decision({ at: 3, requestIds: ['high'], predictedMs: 1, reason: 'priority' }),
          c: decision({ at: 5, requestIds: ['normal'], predictedMs: 2, reason: 'fifo' }),
          d: decision({ at: 7, requestIds: ['long'], predictedMs: 3, reason: 'fifo' }),
          e: decision({ at: 10, requestIds: ['long'], predictedMs: 3, reason: 'fifo' }),
        });
        expectObservable(long).toBe('---a------b--(c|)', { a: out(1), b: out(2), c: out(3, true) });
        expectObservable(at(1, normal)).toBe('-------(n|)', { n: out(1, true) });
        expectObservable(at(2, high)).toBe('-----(h|)', { h: out(1, true) });
        expectSubscriptions(highRun.subscriptions).toBe('---^-!');
        expectSubscriptions(normalRun.subscriptions).toBe('-----^-!');
      });
    });
  });

  describe('batching', () => {
    function runnerOf(cold: TestScheduler['createColdObservable'], maxBatch: number, marble = '---(r|)') {
      const calls: unknown[][] = [];
      const runs: ReturnType<TestScheduler['createColdObservable']>[] = [];
      const runner: BatchRunner = {
        maxBatch,
        run: (items) => {
          calls.push(items);
          const r = cold<unknown[]>(marble, { r: items.map((x) => `${String(x)}!`) });
          runs.push(r);
          return r;
        },
      };
      return { runner, calls, runs };
    }

    it('waits up to the window for more members: steps at frames 0 and 2 run as one batch at 5, a step at 9 runs alone later', () => {
      const pool = new StepScheduler({ costModel: new CostModel({ defaultMs: 1 }), batchWindowMs: 5 });
      const ts = testScheduler();
      ts.run(({ cold, expectObservable, expectSubscriptions, flush }) => {
        const { runner, calls, runs } = runnerOf(cold, 4);
        const cRun = cold('---(r|)', { r: 'c alone' });
        const req = (id: string) => ({ requestId: id, priority: 0, cost: IMAGE, batch: { key: 't2i-256', item: id, runner } });
        const a = pool.step({ ...req('a'), run: () => cold('-(r|)', { r: 'never used' }) });
        const b = pool.step({ ...req('b'), run: () => cold('-(r|)', { r: 'never used' }) });
        const c = pool.step({ ...req('c'), run: () => cRun });
        expectObservable(pool.decisions$).toBe('-----x--------y', {
          x: decision({ at: 5, requestIds: ['a', 'b'], batchKey: 't2i-256', predictedMs: 2, reason: 'fifo' }),
          y: decision({ at: 14, requestIds: ['c'], predictedMs: 1.5, reason: 'fifo' }), // the batch's 3 ms shared by 2 members
        });
        expectObservable(a).toBe('--------(a|)', { a: 'a!' });
        expectObservable(at(2, b)).toBe('--------(b|)', { b: 'b!' });
        expectObservable(at(9, c)).toBe('-----------------(c|)', { c: 'c alone' });
        flush();
        expect(calls).toEqual([['a', 'b']]);
        expectSubscriptions(runs[0]!.subscriptions).toBe('-----^--!');
        expectSubscriptions(cRun.subscriptions).toBe('--------------^--!');
      });
      expect(pool.attained('a')).toBe(1.5);
      expect(pool.attained('b')).toBe(1.5);
      expect(pool.attained('c')).toBe(3);
    });

    it('runs at once, without waiting for the window, when maxBatch is reached', () => {
      const pool = new StepScheduler({ batchWindowMs: 5 });
      const ts = testScheduler();
      ts.run(({ cold, expectObservable, flush }) => {
        const { runner, calls, runs } = runnerOf(cold, 2);
        const req = (id: string) => ({ requestId: id, priority: 0, cost: IMAGE, batch: { key: 'k', item: id, runner }, run: () => of('unused') });
        expectObservable(pool.step(req('a'))).toBe('-----(a|)', { a: 'a!' });
        expectObservable(at(2, pool.step(req('b')))).toBe('-----(b|)', { b: 'b!' });
        flush();
        expect(calls).toEqual([['a', 'b']]);
        ts.expectSubscriptions(runs[0]!.subscriptions).toBe('--^--!');
      });
    });

    it('gathers ready members in ranking order up to maxBatch; the rest form the next batch', () => {
      const pool = new StepScheduler();
      const ts = testScheduler();
      ts.run(({ cold, expectObservable, flush }) => {
        const { runner, calls } = runnerOf(cold, 2, '--(r|)');
        const blocker = pool.step({ requestId: 'x', priority: 0, cost: VIDEO, run: () => cold('-(x|)') });
        const req = (id: string, priority: number) =>
          pool.step({ requestId: id, priority, cost: IMAGE, batch: { key: 'k', item: id, runner }, run: () => of('unused') });
        expectObservable(blocker).toBe('-(x|)');
        expectObservable(req('p0', 0)).toBe('-----(a|)', { a: 'p0!' });
        expectObservable(req('p1', 1)).toBe('---(a|)', { a: 'p1!' });
        expectObservable(req('p2', 2)).toBe('---(a|)', { a: 'p2!' });
        expectObservable(req('q0', 0)).toBe('-----(a|)', { a: 'q0!' });
        flush();
        expect(calls).toEqual([
          ['p2', 'p1'],
          ['p0', 'q0'],
        ]);
      });
    });

    it('members of a batch that re-submit at once batch again (two T2I loops driven by driveLoop, window 0)', () => {
      const pool = new StepScheduler();
      const calls: unknown[][] = [];
      testScheduler().run(({ cold, expectObservable }) => {
        const runner: BatchRunner = {
          maxBatch: 2,
          run: (items) => {
            calls.push(items);
            return cold('--(r|)', { r: items });
          },
        };
        const alone = (i: number, last: boolean) => cold('-(r|)', { r: out(i, last) });
        expectObservable(pool.step({ requestId: 'blocker', priority: 0, cost: VIDEO, run: () => cold('-(x|)') })).toBe('-(x|)');
        expectObservable(denoiseLoop(pool, { id: 'a', steps: 3, cost: IMAGE, run: alone, batch: { key: 'k', runner } })).toBe('---a-b-(c|)', {
          a: out(1),
          b: out(2),
          c: out(3, true),
        });
        expectObservable(denoiseLoop(pool, { id: 'b', steps: 3, cost: IMAGE, run: alone, batch: { key: 'k', runner } })).toBe('---a-b-(c|)', {
          a: out(1),
          b: out(2),
          c: out(3, true),
        });
      });
      expect(calls).toEqual([
        [out(1), out(1)],
        [out(2), out(2)],
        [out(3, true), out(3, true)],
      ]);
    });

    it('a step that ranks above a forming batch runs first; one that ranks below waits for the batch', () => {
      const pool = new StepScheduler({ batchWindowMs: 5 });
      const ts = testScheduler();
      ts.run(({ cold, expectObservable }) => {
        const runner: BatchRunner = { maxBatch: 4, run: () => cold('-(r|)', { r: [] }) };
        const a = pool.step({ requestId: 'a', priority: 0, cost: IMAGE, batch: { key: 'k', item: 'a', runner }, run: () => cold('--(a|)') });
        const urgent = pool.step({ requestId: 'urgent', priority: 1, cost: VIDEO, run: () => cold('--(u|)') });
        const later = pool.step({ requestId: 'later', priority: 0, cost: VIDEO, run: () => cold('--(l|)') });
        expectObservable(a).toBe('-------(a|)');
        expectObservable(at(1, urgent)).toBe('---(u|)');
        expectObservable(at(1, later)).toBe('---------(l|)');
      });
    });

    it('an Error in a result slot fails only that member', () => {
      const pool = new StepScheduler({ batchWindowMs: 5 });
      testScheduler().run(({ cold, expectObservable }) => {
        const bad = new Error('NaN in item b');
        const runner: BatchRunner = { maxBatch: 3, run: () => cold('--(r|)', { r: ['a!', bad, 'c!'] }) };
        const req = (id: string) => pool.step({ requestId: id, priority: 0, cost: IMAGE, batch: { key: 'k', item: id, runner }, run: () => of('unused') });
        expectObservable(req('a')).toBe('--(a|)', { a: 'a!' });
        expectObservable(req('b')).toBe('--#', undefined, bad);
        expectObservable(req('c')).toBe('--(c|)', { c: 'c!' });
      });
    });

    it('a runner that errors, throws or returns the wrong number of results fails every member, and the pool goes on', () => {
      const pool = new StepScheduler({ batchWindowMs: 1 });
      testScheduler().run(({ cold, expectObservable }) => {
        const boom = new Error('runner crashed');
        const erroring: BatchRunner = { maxBatch: 2, run: () => cold('--#', undefined, boom) };
        const throwing: BatchRunner = {
          maxBatch: 2,
          run: () => {
            throw boom;
          },
        };
        const short: BatchRunner = { maxBatch: 2, run: () => cold('-(r|)', { r: ['only one'] }) };
        const req = (id: string, key: string, runner: BatchRunner) =>
          pool.step({ requestId: id, priority: 0, cost: IMAGE, batch: { key, item: id, runner }, run: () => of('unused') });
        const wrongCount = new OmniError('OMNIRX_ERR_INTERNAL', "batch runner (key 's') returned 1 results for 2 items");
        expectObservable(req('a', 'e', erroring)).toBe('--#', undefined, boom);
        expectObservable(req('b', 'e', erroring)).toBe('--#', undefined, boom);
        expectObservable(req('c', 't', throwing)).toBe('--#', undefined, boom);
        expectObservable(req('d', 't', throwing)).toBe('--#', undefined, boom);
        expectObservable(req('e', 's', short)).toBe('---#', undefined, wrongCount);
        expectObservable(req('f', 's', short)).toBe('---#', undefined, wrongCount);
        expectObservable(pool.step({ requestId: 'g', priority: 0, cost: VIDEO, run: () => cold('-(g|)') })).toBe('----(g|)');
      });
    });
  });

  describe('cancellation', () => {
    it('a queued step unsubscribed before its grant never runs, and the steps behind it move up', () => {
      const pool = new StepScheduler();
      testScheduler().run(({ cold, expectObservable, expectSubscriptions }) => {
        const aRun = cold('---(a|)');
        const bRun = cold('---(b|)');
        const cRun = cold('---(c|)');
        const step = (id: string, run: Observable<string>) => pool.step({ requestId: id, priority: 0, cost: VIDEO, run: () => run });
        expectObservable(step('a', aRun)).toBe('---(a|)');
        expectObservable(step('b', bRun), '^!').toBe('--');
        expectObservable(step('c', cRun)).toBe('------(c|)');
        expectSubscriptions(aRun.subscriptions).toBe('^--!');
        expectSubscriptions(bRun.subscriptions).toBe([]);
        expectSubscriptions(cRun.subscriptions).toBe('---^--!');
      });
      expect(pool.stats()).toEqual({ ready: 0, inFlight: 0, granted: 2 });
    });

    it('a running step unsubscribed is not interrupted: its result is dropped and the next step starts when it settles', () => {
      const pool = new StepScheduler();
      testScheduler().run(({ cold, expectObservable, expectSubscriptions }) => {
        const aRun = cold('---(a|)');
        const bRun = cold('---(b|)');
        const step = (id: string, run: Observable<string>) => pool.step({ requestId: id, priority: 0, cost: VIDEO, run: () => run });
        expectObservable(step('a', aRun), '^!').toBe('--');
        expectObservable(step('b', bRun)).toBe('------(b|)');
        expectSubscriptions(aRun.subscriptions).toBe('^--!');
        expectSubscriptions(bRun.subscriptions).toBe('---^--!');
      });
      expect(pool.attained('a')).toBe(3); // the pool time it used is still accounted
    });

    it('cancelling a loop (driveLoop) stops at the step boundary; the other loop gets the pool', () => {
      const pool = new StepScheduler();
      testScheduler().run(({ cold, expectObservable }) => {
        const a = denoiseLoop(pool, { id: 'a', steps: 4, run: (i, last) => cold('--(r|)', { r: out(i, last) }) });
        const b = denoiseLoop(pool, { id: 'b', steps: 3, run: (i, last) => cold('--(r|)', { r: out(i, last) }) });
        expectObservable(a, '^----!').toBe('--a--', { a: out(1) });
        expectObservable(b).toBe('----a---b-(c|)', { a: out(1), b: out(2), c: out(3, true) });
      });
    });

    it('unsubscribing the only member of a forming batch cancels the window timer', () => {
      const ts = testScheduler();
      const timers: Subscription[] = [];
      const spy: SchedulerLike = {
        now: () => ts.now(),
        schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay?: number, state?: T): Subscription {
          const s = ts.schedule(work, delay, state);
          timers.push(s);
          return s;
        },
      };
      const pool = new StepScheduler({ scheduler: spy, batchWindowMs: 5 });
      ts.run(({ cold, expectObservable, flush }) => {
        const runner: BatchRunner = { maxBatch: 4, run: () => cold('-(r|)', { r: [] }) };
        const aRun = cold('-(a|)');
        expectObservable(pool.decisions$).toBe('------');
        expectObservable(pool.step({ requestId: 'a', priority: 0, cost: IMAGE, batch: { key: 'k', item: 'a', runner }, run: () => aRun }), '^!').toBe('--');
        flush();
        expect(timers).toHaveLength(1);
        expect(timers[0]!.closed).toBe(true);
        expect(aRun.subscriptions).toEqual([]);
      });
      expect(pool.stats()).toEqual({ ready: 0, inFlight: 0, granted: 0 });
    });
  });

  describe('failure isolation', () => {
    it('one of three co-scheduled requests fails; the other two complete with their results', () => {
      const pool = new StepScheduler();
      const nan = new OmniError('OMNIRX_ERR_NON_FINITE', 'step 1 of request b produced NaN');
      testScheduler().run(({ cold, expectObservable }) => {
        const ok = (i: number, last: boolean) => cold('--(r|)', { r: out(i, last) });
        const a = denoiseLoop(pool, { id: 'a', steps: 2, run: ok });
        const b = denoiseLoop(pool, { id: 'b', steps: 2, run: () => cold<Out>('--#', undefined, nan) });
        const c = denoiseLoop(pool, { id: 'c', steps: 2, run: ok });
        expectObservable(a).toBe('--a-----(b|)', { a: out(1), b: out(2, true) });
        expectObservable(b).toBe('----#', undefined, nan);
        expectObservable(c).toBe('------a---(b|)', { a: out(1), b: out(2, true) });
      });
    });

    it('a run() that throws synchronously, or completes without a value, errors only its own step', () => {
      const pool = new StepScheduler();
      testScheduler().run(({ cold, expectObservable }) => {
        const thrown = new Error('bad shape');
        expectObservable(
          pool.step<string>({
            requestId: 'a',
            priority: 0,
            cost: VIDEO,
            run: () => {
              throw thrown;
            },
          }),
        ).toBe('#', undefined, thrown);
        expectObservable(pool.step({ requestId: 'b', priority: 0, cost: VIDEO, run: () => cold('-|') })).toBe(
          '-#',
          undefined,
          new OmniError('OMNIRX_ERR_INTERNAL', 'a step of request b completed without producing a result'),
        );
        expectObservable(pool.step({ requestId: 'c', priority: 0, cost: VIDEO, run: () => cold('-(c|)') })).toBe('--(c|)');
      });
    });

    it('a non-finite priority is refused on subscription', () => {
      const pool = new StepScheduler();
      const errors: unknown[] = [];
      pool.step({ requestId: 'a', priority: Number.NaN, cost: VIDEO, run: () => of(1) }).subscribe({ error: (e) => errors.push(e) });
      expect(errors[0]).toBeInstanceOf(RangeError);
      expect(pool.stats()).toEqual({ ready: 0, inFlight: 0, granted: 0 });
    });
  });

  describe('re-entrancy', () => {
    it('subscribers that re-submit from their complete handler keep FIFO order (trampolined dispatch)', () => {
      const pool = new StepScheduler();
      const log: string[] = [];
      testScheduler().run(({ cold, expectObservable }) => {
        expectObservable(pool.step({ requestId: 'blocker', priority: 0, cost: VIDEO, run: () => cold('--(x|)') })).toBe('--(x|)');
        const submit = (id: string, n: number): void => {
          pool.step({ requestId: id, priority: 0, cost: IMAGE, run: () => of(`${id}${n}`) }).subscribe({
            next: (v) => log.push(v),
            complete: () => {
              if (n < 3) submit(id, n + 1);
            },
          });
        };
        timer(1).subscribe(() => {
          submit('a', 1);
          submit('b', 1);
        });
      });
      expect(log).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'b3']);
    });

    it('100 000 synchronous steps driven through driveLoop run in constant stack', () => {
      const pool = new StepScheduler();
      let last: Out | undefined;
      denoiseLoop(pool, { id: 'sync', steps: 100_000, run: (i, done) => of(out(i, done)) }).subscribe((o) => (last = o));
      expect(last).toEqual(out(100_000, true));
      expect(pool.stats()).toEqual({ ready: 0, inFlight: 0, granted: 100_000 });
    });
  });

  describe('real time', () => {
    it('batches promise steps on the default asyncScheduler within the window', async () => {
      const pool = new StepScheduler({ batchWindowMs: 20 });
      const calls: unknown[][] = [];
      const runner: BatchRunner = {
        maxBatch: 8,
        run: async (items) => {
          calls.push(items);
          await new Promise((r) => setTimeout(r, 5));
          return items.map((x) => `${String(x)}!`);
        },
      };
      const step = (id: string) =>
        firstValueFrom(pool.step({ requestId: id, priority: 0, cost: IMAGE, batch: { key: 'k', item: id, runner }, run: () => Promise.resolve('alone') }));
      const a = step('a');
      await new Promise((r) => setTimeout(r, 5));
      const b = step('b');
      await expect(Promise.all([a, b])).resolves.toEqual(['a!', 'b!']);
      expect(calls).toEqual([['a', 'b']]);
      expect(pool.stats()).toEqual({ ready: 0, inFlight: 0, granted: 2 });
      expect(pool.attained('a')).toBeGreaterThan(0);
    });
  });

  describe('concurrency', () => {
    it('with concurrency 2 two steps run at once and the third starts when a slot frees', () => {
      const pool = new StepScheduler({ concurrency: 2 });
      const seen: Array<ReturnType<StepScheduler['stats']>> = [];
      const ts = testScheduler();
      ts.run(({ cold, expectObservable }) => {
        const step = (id: string) => pool.step({ requestId: id, priority: 0, cost: VIDEO, run: () => cold('---(r|)', { r: id }) });
        expectObservable(step('a')).toBe('---(r|)', { r: 'a' });
        expectObservable(step('b')).toBe('---(r|)', { r: 'b' });
        expectObservable(step('c')).toBe('------(r|)', { r: 'c' });
        ts.schedule(() => seen.push(pool.stats()), 1);
      });
      expect(seen).toEqual([{ ready: 1, inFlight: 2, granted: 2 }]);
    });

    it('rejects a bad configuration', () => {
      expect(() => new StepScheduler({ concurrency: 0 })).toThrow(RangeError);
      expect(() => new StepScheduler({ concurrency: 1.5 })).toThrow(RangeError);
      expect(() => new StepScheduler({ batchWindowMs: -1 })).toThrow(RangeError);
    });
  });

  describe('accounting and the cost model', () => {
    it('feeds measured step times to the cost model and estimates = steps × predict', () => {
      const costs = new CostModel({ defaultMs: 100, alpha: 0.5 });
      const pool = new StepScheduler({ costModel: costs });
      testScheduler().run(({ cold, expectObservable }) => {
        const frames = ['----(r|)', '--(r|)', '--(r|)'];
        expectObservable(denoiseLoop(pool, { id: 'a', steps: 3, run: (i, last) => cold(frames[i - 1]!, { r: out(i, last) }) })).toBe('----a-b-(c|)', {
          a: out(1),
          b: out(2),
          c: out(3, true),
        });
      });
      // first measurement replaces the default (4), then EMA with alpha 0.5: 4 → 3 → 2.5
      expect(costs.samples(VIDEO)).toBe(3);
      expect(costs.predict(VIDEO)).toBe(2.5);
      expect(pool.estimate(VIDEO, 10)).toBe(25);
      expect(pool.estimate(IMAGE, 4)).toBe(400);
      expect(pool.attained('a')).toBe(8);
    });

    it('a failed step is charged to its request but does not calibrate the cost model', () => {
      const costs = new CostModel();
      const pool = new StepScheduler({ costModel: costs });
      testScheduler().run(({ cold, expectObservable }) => {
        expectObservable(pool.step({ requestId: 'a', priority: 0, cost: VIDEO, run: () => cold('---#') })).toBe('---#');
      });
      expect(pool.attained('a')).toBe(3);
      expect(costs.samples(VIDEO)).toBe(0);
    });

    it('forget drops a request’s accounting; a step still running when forgotten is not credited', () => {
      const pool = new StepScheduler();
      const seen: number[] = [];
      testScheduler().run(({ cold, expectObservable }) => {
        expectObservable(pool.step({ requestId: 'a', priority: 0, cost: VIDEO, run: () => cold('--(r|)') })).toBe('--(r|)');
        expectObservable(at(3, pool.step({ requestId: 'a', priority: 0, cost: VIDEO, run: () => cold('--(r|)') }))).toBe('-----(r|)');
        timer(4).subscribe(() => {
          seen.push(pool.attained('a'));
          pool.forget('a');
        });
      });
      expect(seen).toEqual([2]);
      expect(pool.attained('a')).toBe(0);
    });
  });
});
