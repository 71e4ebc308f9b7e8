import { asyncScheduler, type SchedulerLike, type Subscription } from 'rxjs';
import { estimateMemory, resolveWanParams } from '../../src/families/wan/admission';
import { Engine, type EngineOptions } from '../../src/engine/engine';
import type { ScheduleDecision } from '../../src/executor/scheduler';
import { loadNative, type NativeBinding } from '../../src/native/binding';
import type { ModelSpec as WanModelSpec } from '../../src/families/wan/model-spec';
import { defaultPolicies } from '../../src/pipeline/policies/policies';
import { inProcess } from '../helpers/engine';
import { DEFAULT_LIMITS } from '../../src/request/limits';
import type { OmniEvent } from '../../src/request/omni-event';
import { OmniRequestSchema, type OmniRequestInput } from '../../src/request/omni-request';
import { makeModelsDir, poisonToOverflow, tinySpec } from '../helpers/tiny-model';
import { builtinFamilies } from '../../src/families';

let modelsDir: string;
let native: NativeBinding;
const engines: Engine[] = [];

async function engineWith(options: Partial<EngineOptions> = {}): Promise<Engine> {
  const e = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', native, ...options });
  engines.push(e);
  return e;
}

const req = (id: string, over: Partial<OmniRequestInput['diffusion']> = {}, extra: Partial<OmniRequestInput> = {}): OmniRequestInput => ({
  requestId: id,
  model: 'tiny',
  task: 'T2V',
  inputs: { prompt: 'a red ball in a blue room' },
  diffusion: { seed: 7, numInferenceSteps: 3, ...over },
  ...extra,
});

/** One global, ordered log of every event of every tracked request. */
type Log = Array<{ id: string; ev: OmniEvent }>;

interface Tracked {
  id: string;
  events: OmniEvent[];
  /** Resolves with the request's events once its stream completes. */
  done: Promise<OmniEvent[]>;
  sub: Subscription;
  /** Resolves once an event satisfying `pred` has arrived (at once if one already has). */
  when(pred: (ev: OmniEvent, events: OmniEvent[]) => boolean): Promise<void>;
}

function submit(engine: Engine, input: OmniRequestInput, log: Log = []): Tracked {
  const id = input.requestId!;
  const events: OmniEvent[] = [];
  const waiters: Array<{ pred: (ev: OmniEvent, events: OmniEvent[]) => boolean; resolve: () => void }> = [];
  let resolveDone!: (evs: OmniEvent[]) => void;
  const done = new Promise<OmniEvent[]>((r) => (resolveDone = r));
  const sub = engine.generate(input).subscribe({
    next: (ev) => {
      events.push(ev);
      log.push({ id, ev });
      for (const w of [...waiters]) {
        if (w.pred(ev, events)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      }
    },
    complete: () => resolveDone(events),
  });
  return {
    id,
    events,
    done,
    sub,
    when: (pred) =>
      events.some((ev) => pred(ev, events))
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            waiters.push({ pred, resolve });
          }),
  };
}

const isType = (t: OmniEvent['type']) => (ev: OmniEvent) => ev.type === t;
const nthStep = (n: number) => (ev: OmniEvent, events: OmniEvent[]) => ev.type === 'step' && events.filter((e) => e.type === 'step').length >= n;
const types = (evs: OmniEvent[]) => evs.map((e) => e.type);
const last = (evs: OmniEvent[]) => evs[evs.length - 1];
/** Index in the global log of the first event of `id` matching `pred`. */
const at = (log: Log, id: string, pred: (ev: OmniEvent) => boolean) => log.findIndex((x) => x.id === id && pred(x.ev));

function recordDecisions(engine: Engine): { decisions: ScheduleDecision[]; stop: () => void } {
  const decisions: ScheduleDecision[] = [];
  const sub = inProcess(engine).steps.decisions$.subscribe((d) => decisions.push(d));
  return { decisions, stop: () => sub.unsubscribe() };
}

/** Lets pending promise callbacks and timers run. */
const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

function expectIdle(engine: Engine): void {
  expect(engine.stats()).toEqual({ queued: 0, running: 0, memoryBytes: 0, sessions: 0 });
  expect(inProcess(engine).steps.stats()).toMatchObject({ ready: 0, inFlight: 0 });
}

beforeAll(async () => {
  native = loadNative();
  // 'tiny-nan': the DiT's output weights overflow, so its first denoise step produces non-finite values.
  modelsDir = await makeModelsDir([{ spec: tinySpec('tiny-nan'), seed: 1 }]);
  poisonToOverflow(modelsDir, 'tiny-nan');
});

afterAll(async () => {
  for (const e of engines) await e.close();
});

describe('bounded queue', () => {
  it('submitted at once to an idle engine (1 running + 2 queued), the 4th is refused immediately; the others complete', async () => {
    const engine = await engineWith({ maxQueued: 2, maxRunning: 1 });
    const log: Log = [];
    const ts = [1, 2, 3, 4].map((i) => submit(engine, req(`q${i}`, { seed: i }), log));
    // Refused synchronously, before anything ran: one error event and nothing else.
    expect(types(ts[3].events)).toEqual(['error']);
    expect(ts[3].events[0]).toMatchObject({ type: 'error', requestId: 'q4', code: 'OMNIRX_ERR_QUEUE_FULL' });
    expect(ts[3].events[0].type === 'error' && ts[3].events[0].message).toMatch(/queue/);
    expect(ts.slice(0, 3).map((t) => t.events[0])).toEqual([
      { type: 'queued', requestId: 'q1', position: 0 },
      { type: 'queued', requestId: 'q2', position: 1 },
      { type: 'queued', requestId: 'q3', position: 2 },
    ]);
    const results = await Promise.all(ts.map((t) => t.done));
    for (const evs of results.slice(0, 3)) expect(last(evs).type).toBe('final');
    // maxRunning 1: each is admitted only after the previous one finished.
    expect(at(log, 'q2', isType('admitted'))).toBeGreaterThan(at(log, 'q1', isType('final')));
    expect(at(log, 'q3', isType('admitted'))).toBeGreaterThan(at(log, 'q2', isType('final')));
    expectIdle(engine);
  });

  it('with one request running, two more queue at positions 0 and 1 and the next is refused', async () => {
    const engine = await engineWith({ maxQueued: 2, maxRunning: 1 });
    const long = submit(engine, req('long', { numInferenceSteps: 20 }));
    await long.when(isType('admitted'));
    expect(engine.stats()).toMatchObject({ queued: 0, running: 1 });
    const a = submit(engine, req('a'));
    const b = submit(engine, req('b'));
    const c = submit(engine, req('c'));
    expect(a.events[0]).toEqual({ type: 'queued', requestId: 'a', position: 0 });
    expect(b.events[0]).toEqual({ type: 'queued', requestId: 'b', position: 1 });
    expect(c.events).toEqual([expect.objectContaining({ type: 'error', code: 'OMNIRX_ERR_QUEUE_FULL' })]);
    expect(engine.stats()).toMatchObject({ queued: 2, running: 1 });
    for (const t of [long, a, b]) expect(last(await t.done).type).toBe('final');
    // Room again once the queue drained.
    const d = submit(engine, req('d'));
    expect(last(await d.done).type).toBe('final');
    expectIdle(engine);
  });

  it('cancelling a queued request removes it: never admitted, no step events, the others proceed', async () => {
    const engine = await engineWith({ maxRunning: 1 });
    const rec = recordDecisions(engine);
    const long = submit(engine, req('long', { numInferenceSteps: 20 }));
    await long.when(isType('admitted'));
    const x = submit(engine, req('x'));
    const y = submit(engine, req('y'));
    expect(x.events).toEqual([{ type: 'queued', requestId: 'x', position: 0 }]);
    expect(y.events).toEqual([{ type: 'queued', requestId: 'y', position: 1 }]);
    expect(engine.stats().queued).toBe(2);
    x.sub.unsubscribe();
    expect(engine.stats().queued).toBe(1);
    const [longEvents, yEvents] = await Promise.all([long.done, y.done]);
    rec.stop();
    expect(last(longEvents).type).toBe('final');
    expect(last(yEvents).type).toBe('final');
    await tick(10);
    expect(types(x.events)).toEqual(['queued']);
    expect(rec.decisions.some((d) => d.requestIds.includes('x'))).toBe(false);
    expect(rec.decisions.filter((d) => d.requestIds.includes('y'))).toHaveLength(3);
    expectIdle(engine);
  });

  it('a duplicate requestId while the first is running is an error naming requestId; the first completes', async () => {
    const engine = await engineWith();
    const first = submit(engine, req('dup', { numInferenceSteps: 6 }));
    await first.when(isType('admitted'));
    const second = submit(engine, req('dup', { seed: 99 }));
    expect(second.events).toEqual([expect.objectContaining({ type: 'error', requestId: 'dup', code: 'OMNIRX_ERR_INVALID_REQUEST', param: 'requestId' })]);
    // Also while still queued.
    const q = await engineWith({ maxRunning: 1 });
    const blocker = submit(q, req('blocker', { numInferenceSteps: 6 }));
    const queued = submit(q, req('dup2'));
    const again = submit(q, req('dup2'));
    expect(last(again.events)).toMatchObject({ type: 'error', param: 'requestId' });
    expect(last(await first.done).type).toBe('final');
    expect(last(await blocker.done).type).toBe('final');
    expect(last(await queued.done).type).toBe('final');
    // Once finished, the id may be used again.
    expect(last(await submit(engine, req('dup')).done).type).toBe('final');
    expectIdle(engine);
    expectIdle(q);
  });
});

describe('memory admission', () => {
  /** The claim the engine will make for `input` (the same estimate the engine computes). */
  async function claimOf(engine: Engine, input: OmniRequestInput) {
    const { spec } = await engine.models.get(input.model);
    const wan = spec as WanModelSpec;
    return estimateMemory(resolveWanParams(OmniRequestSchema.parse(input), wan, { limits: DEFAULT_LIMITS, policies: defaultPolicies() }), wan);
  }

  it('a request that can never fit the budget fails with OMNIRX_ERR_MEMORY naming the bytes', async () => {
    const probe = await engineWith();
    const input = req('big', { width: 32, height: 32 });
    const { residentBytes, peakBytes } = await claimOf(probe, input);
    const need = residentBytes + peakBytes;
    const engine = await engineWith({ memoryBudgetBytes: need - 1 });
    const events = await submit(engine, input).done;
    expect(types(events)).toEqual(['queued', 'error']);
    expect(events[1]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_MEMORY' });
    const message = events[1].type === 'error' ? events[1].message : '';
    expect(message).toContain(`${residentBytes} resident`);
    expect(message).toContain(`${peakBytes} peak`);
    expect(message).toContain(`${need} bytes`);
    expect(message).toContain(`budget of ${need - 1} bytes`);
    // A smaller request still fits and runs.
    expect(last(await submit(engine, req('small')).done).type).toBe('final');
    expectIdle(engine);
  });

  it('two requests that fit alone but not together run one after the other', async () => {
    const probe = await engineWith();
    const { residentBytes, peakBytes } = await claimOf(probe, req('p'));
    // One claim: R + P. Two: 2R + P > budget.
    const budget = residentBytes + peakBytes + Math.floor(residentBytes / 2);
    const engine = await engineWith({ memoryBudgetBytes: budget });
    const log: Log = [];
    const a = submit(engine, req('a', { numInferenceSteps: 4 }), log);
    const b = submit(engine, req('b', { numInferenceSteps: 4, seed: 8 }), log);
    await a.when(isType('admitted'));
    const seenWhileA = engine.stats();
    const [ea, eb] = await Promise.all([a.done, b.done]);
    expect(last(ea).type).toBe('final');
    expect(last(eb).type).toBe('final');
    expect(seenWhileA).toEqual({ queued: 1, running: 1, memoryBytes: residentBytes + peakBytes, sessions: 0 });
    expect(at(log, 'b', isType('admitted'))).toBeGreaterThan(at(log, 'a', isType('final')));
    // With room for both, the same two requests overlap.
    const roomy = await engineWith({ memoryBudgetBytes: 2 * residentBytes + peakBytes });
    const log2: Log = [];
    const c = submit(roomy, req('c', { numInferenceSteps: 4 }), log2);
    const d = submit(roomy, req('d', { numInferenceSteps: 4, seed: 8 }), log2);
    await Promise.all([c.done, d.done]);
    expect(at(log2, 'd', isType('admitted'))).toBeLessThan(at(log2, 'c', isType('final')));
    expectIdle(engine);
    expectIdle(roomy);
  });
});

describe('step scheduling across requests', () => {
  it('a later high-priority job takes every step boundary from a running low-priority job', async () => {
    const engine = await engineWith({ maxRunning: 2 });
    const rec = recordDecisions(engine);
    const log: Log = [];
    const low = submit(engine, req('low', { numInferenceSteps: 40 }, { priority: -5 }), log);
    await low.when(nthStep(3));
    const high = submit(engine, req('high', { numInferenceSteps: 4 }, { priority: 10 }), log);
    const [le, he] = await Promise.all([low.done, high.done]);
    rec.stop();
    expect(last(le).type).toBe('final');
    expect(last(he).type).toBe('final');
    const order = rec.decisions.map((d) => d.requestIds[0]);
    const first = order.indexOf('high');
    const lastHigh = order.lastIndexOf('high');
    // high's 4 steps ran back to back, with low steps before and after them.
    expect(lastHigh - first).toBe(3);
    expect(first).toBeGreaterThanOrEqual(3);
    expect(order.slice(lastHigh + 1).length).toBeGreaterThan(0);
    expect(order.slice(lastHigh + 1).every((id) => id === 'low')).toBe(true);
    expect(rec.decisions.filter((d) => d.requestIds[0] === 'high').some((d) => d.reason === 'priority')).toBe(true);
    expect(at(log, 'high', isType('final'))).toBeLessThan(at(log, 'low', isType('final')));
    expectIdle(engine);
  });

  it('a short 4-step job submitted during a 40-step job finishes first (least attained service)', async () => {
    // Attained service is measured step time. On a loaded machine one stalled step of the short job (a GC pause,
    // another test worker) can outweigh the long job's ten ~1 ms steps, and the long job then rightly runs first.
    // A clock that advances 1 ms per reading makes every step measure a tick or two, so the ranking under test is
    // decided by steps attained and not by the machine's load. Timers still run on real time.
    let ticks = 0;
    const tickClock: SchedulerLike = { now: () => ++ticks, schedule: asyncScheduler.schedule.bind(asyncScheduler) };
    const engine = await engineWith({ scheduler: tickClock });
    const rec = recordDecisions(engine);
    const log: Log = [];
    const long = submit(engine, req('long', { numInferenceSteps: 40 }), log);
    await long.when(nthStep(10));
    const short = submit(engine, req('short', { numInferenceSteps: 4, seed: 3 }), log);
    const [le, se] = await Promise.all([long.done, short.done]);
    rec.stop();
    expect(last(le).type).toBe('final');
    expect(last(se).type).toBe('final');
    expect(at(log, 'short', isType('final'))).toBeLessThan(at(log, 'long', isType('final')));
    const order = rec.decisions.map((d) => d.requestIds[0]);
    const first = order.indexOf('short');
    const lastShort = order.lastIndexOf('short');
    // Same priority, but short has attained far less service: long gets (almost) no step in between.
    expect(order.slice(first, lastShort + 1).filter((id) => id === 'long').length).toBeLessThanOrEqual(1);
    expect(order.slice(lastShort + 1).filter((id) => id === 'long').length).toBeGreaterThanOrEqual(20);
    expect(rec.decisions.some((d) => d.requestIds[0] === 'short' && d.reason === 'least-attained-service')).toBe(true);
    // Steps of the long job after the short one finished: it got the rest.
    expect(le.filter((e) => e.type === 'step')).toHaveLength(40);
    expectIdle(engine);
  });

  it('a NaN in one of three co-scheduled requests fails only that one, with node and completedSteps', async () => {
    const engine = await engineWith();
    const rec = recordDecisions(engine);
    const good1 = submit(engine, req('good1', { numInferenceSteps: 6, seed: 1 }));
    const bad = submit(engine, req('bad', { numInferenceSteps: 6 }, { model: 'tiny-nan' }));
    const good2 = submit(engine, req('good2', { numInferenceSteps: 6, seed: 2 }));
    const [g1, b, g2] = await Promise.all([good1.done, bad.done, good2.done]);
    rec.stop();
    const err = last(b);
    expect(err).toMatchObject({ type: 'error', requestId: 'bad', code: 'OMNIRX_ERR_NON_FINITE', node: 'denoise', completedSteps: 0 });
    expect(err.type === 'error' && err.message).toMatch(/non-finite/);
    expect(b.filter((e) => e.type === 'step')).toHaveLength(0);
    for (const g of [g1, g2]) {
      expect(last(g).type).toBe('final');
      expect(g.filter((e) => e.type === 'step')).toHaveLength(6);
    }
    // The failed step was co-scheduled with the others: good steps were still granted after it failed.
    const order = rec.decisions.map((d) => d.requestIds[0]);
    const badAt = order.indexOf('bad');
    expect(badAt).toBeGreaterThanOrEqual(0);
    expect(order.filter((id) => id === 'bad')).toHaveLength(1);
    expect(order.slice(badAt + 1).some((id) => id.startsWith('good'))).toBe(true);
    expectIdle(engine);
  });
});
