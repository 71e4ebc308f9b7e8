/**
 * World sessions end to end on tiny seeded models (Engine.session → WorldSession → ChunkRollout): chunk events with
 * frames and PTS, credits gating the rollout, actions applying from the next chunk, flush redoing the chunk in flight,
 * close / idle expiry releasing the KV slabs and native memory, image-to-world, concurrency with generation requests,
 * bounded memory over 2,000 frames, and hostile input at the session boundary.
 *
 * Determinism is what makes these tests exact: a chunk's frames depend only on the session seed, the chunk index,
 * its action and the committed history, so a schedule driven by credits (an action is set before the credit that
 * starts its chunk is granted) reproduces bit for bit whatever else runs on the engine.
 */
import { lastValueFrom, toArray, type Observable } from 'rxjs';
import { Engine } from '../../src/engine/engine';
import type { WorldSession } from '../../src/engine/session';
import { loadNative } from '../../src/native/binding';
import { flowMatchSigmas } from '../../src/pipeline/samplers/flow-match-euler';
import type { ChunkEvent, OmniEvent } from '../../src/request/omni-event';
import { finalOf } from '../helpers/events';
import { settledBytesInUse } from '../helpers/native-memory';
import { makeModelsDir, tinyWorldSpec } from '../helpers/tiny-model';
import { builtinFamilies } from '../../src/families';
import { inProcess } from '../helpers/engine';

let modelsDir: string;
let engine: Engine;

beforeAll(async () => {
  // tiny-world-eta: the same seed-3 weights with a world-session default η of 1 (and a T2V one of 0.5, not the sessions').
  modelsDir = await makeModelsDir([
    { spec: tinyWorldSpec(), seed: 3 },
    { spec: { ...tinyWorldSpec(), id: 'tiny-world-eta', defaults: { ...tinyWorldSpec().defaults, eta: 0.5, world: { eta: 1 } } }, seed: 3 },
  ]);
  engine = await Engine.create({
    families: builtinFamilies(),
    modelsDir,
    defaultModel: 'tiny-world',
    sessions: { chunkFrames: 1, sinkFrames: 1, localWindowFrames: 2, steps: 2, firstChunkSteps: 3, maxSessions: 3 },
  });
});

afterAll(async () => {
  await engine.close();
});

/** Collects a session's events; `wait(pred)` resolves with the next event matching `pred`. */
class Recorder {
  readonly events: OmniEvent[] = [];
  private waiters: Array<{ pred: (e: OmniEvent) => boolean; resolve: (e: OmniEvent) => void }> = [];
  readonly done: Promise<OmniEvent[]>;

  constructor(events$: Observable<OmniEvent>) {
    this.done = new Promise((resolve) => events$.subscribe({ next: (e) => this.push(e), complete: () => resolve(this.events) }));
  }

  private push(e: OmniEvent): void {
    this.events.push(e);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(e)) return true;
      w.resolve(e);
      return false;
    });
  }

  wait(pred: (e: OmniEvent) => boolean): Promise<OmniEvent> {
    return new Promise((resolve) => this.waiters.push({ pred, resolve }));
  }

  chunks(): ChunkEvent[] {
    return this.events.filter((e): e is ChunkEvent => e.type === 'chunk');
  }
}

/** Subscribes to a session's events through a recorder. */
function record(s: WorldSession): Recorder {
  return new Recorder(s.events$);
}

/** Each chunk's frames as base64 (compared bit for bit). */
const frames = (cs: ChunkEvent[]) => cs.map((c) => Buffer.from(c.artifact.kind === 'video' ? c.artifact.frames : []).toString('base64'));

const isChunk = (n: number) => (e: OmniEvent) => e.type === 'chunk' && e.rollout?.chunk === n;

/** Runs `actions.length` chunks, setting action k before granting the credit of chunk k; returns the chunk events. */
async function scripted(s: WorldSession, actions: Array<{ key: 'none' | 'up' | 'down' | 'left' | 'right'; id?: string }>): Promise<ChunkEvent[]> {
  const rec = record(s);
  for (let k = 0; k < actions.length; k++) {
    s.actions.next(actions[k]);
    s.credits.next(1);
    await rec.wait(isChunk(k));
  }
  s.close();
  await rec.done;
  await s.whenReleased();
  return rec.chunks();
}

const PLAN: Array<{ key: 'none' | 'up' | 'down' | 'left' | 'right'; id?: string }> = [
  { key: 'none' },
  { key: 'up', id: 'a1' },
  { key: 'up' },
  { key: 'left', id: 'a2' },
  { key: 'down' },
  { key: 'right' },
];

describe('Engine.session', () => {
  it('emits admitted, then per chunk its denoise steps and one chunk event with RGB24 frames, PTS and the action used; close → final', async () => {
    const s = await engine.session({ prompt: 'a red ball in a blue room', seed: 11, fps: 10 });
    const rec = record(s);
    s.credits.next(3);
    await rec.wait(isChunk(2));
    s.close();
    const events = await rec.done;
    expect(events[0]).toMatchObject({
      type: 'admitted',
      requestId: s.id,
      model: 'tiny-world',
      params: { task: 'WORLD', width: 16, height: 16, fps: 10, seed: 11, chunkFrames: 1, stepsPerChunk: 2, firstChunkSteps: 3 },
    });
    // Chunk 0 (no history) runs firstChunkSteps, the others steps.
    expect(events.slice(1).map((e) => e.type)).toEqual(['step', 'step', 'step', 'chunk', 'step', 'step', 'chunk', 'step', 'step', 'chunk', 'final']);
    const chunks = rec.chunks();
    expect(chunks.map((c) => c.rollout)).toEqual([0, 1, 2].map((k) => ({ chunk: k, firstFrame: k, ptsMs: k * 100, action: { key: 'none' } })));
    for (const c of chunks) {
      expect(c.artifact).toMatchObject({ kind: 'video', width: 16, height: 16, numFrames: 1, fps: 10 });
      if (c.artifact.kind === 'video') expect(c.artifact.frames.length).toBe(16 * 16 * 3);
    }
    // Consecutive frames differ (new noise and history each chunk).
    const [f0, f1] = chunks.map((c) => (c.artifact.kind === 'video' ? c.artifact.frames : new Uint8Array()));
    expect(Buffer.compare(Buffer.from(f0), Buffer.from(f1))).not.toBe(0);
    const steps = events.filter((e) => e.type === 'step');
    expect(steps.map((e) => (e.type === 'step' ? [e.index, e.total] : []))).toEqual([
      [0, 3],
      [1, 3],
      [2, 3],
      [0, 2],
      [1, 2],
      [0, 2],
      [1, 2],
    ]);
    // Each chunk's σ follow its own shifted schedule: flowMatchSigmas(3) for chunk 0, flowMatchSigmas(2) after.
    const shift = events[0].type === 'admitted' ? (events[0].params as { flowShift: number }).flowShift : NaN;
    const expected = [...Array.from(flowMatchSigmas(3, shift)).slice(0, 3), ...[0, 1].flatMap(() => Array.from(flowMatchSigmas(2, shift)).slice(0, 2))];
    steps.forEach((e, i) => expect(e.type === 'step' ? e.sigma : NaN).toBeCloseTo(expected[i], 12));
    expect(finalOf(events).seed).toBe(11);
  });

  it('credits gate the rollout: no chunk starts without credit, and a late grant resumes it', async () => {
    const s = await engine.session({ prompt: 'a ball', seed: 5 });
    const rec = record(s);
    s.credits.next(2);
    await rec.wait(isChunk(1));
    // Give the engine ample time to (wrongly) start a third chunk.
    await new Promise((r) => setTimeout(r, 150));
    expect(rec.chunks().length).toBe(2);
    expect(rec.events.filter((e) => e.type === 'step').length).toBe(3 + 2);
    expect(s.stats().creditBalance).toBe(0);
    s.credits.next(1);
    await rec.wait(isChunk(2));
    expect(rec.chunks().length).toBe(3);
    s.close();
    await rec.done;
  });

  it('an action applies from the chunk that starts after it, and chunk events echo its id; runs are deterministic', async () => {
    const a = await scripted(await engine.session({ prompt: 'a red ball', seed: 21 }), PLAN);
    expect(a.map((c) => c.rollout?.action)).toEqual([
      { key: 'none' },
      { key: 'up', id: 'a1' },
      { key: 'up' },
      { key: 'left', id: 'a2' },
      { key: 'down' },
      { key: 'right' },
    ]);
    const b = await scripted(await engine.session({ prompt: 'a red ball', seed: 21 }), PLAN);
    expect(b.map((c) => Buffer.from(c.artifact.kind === 'video' ? c.artifact.frames : []).toString('base64'))).toEqual(
      a.map((c) => Buffer.from(c.artifact.kind === 'video' ? c.artifact.frames : []).toString('base64')),
    );
    // The actions change the frames: the same seed with all-none differs from chunk 1 on, not at chunk 0.
    const n = await scripted(
      await engine.session({ prompt: 'a red ball', seed: 21 }),
      PLAN.map(() => ({ key: 'none' as const })),
    );
    const frames = (cs: ChunkEvent[]) => cs.map((c) => Buffer.from(c.artifact.kind === 'video' ? c.artifact.frames : []));
    expect(Buffer.compare(frames(n)[0], frames(a)[0])).toBe(0);
    expect(Buffer.compare(frames(n)[1], frames(a)[1])).not.toBe(0);
  });

  it('two sessions and a T2V request running together give the same outputs as their solo runs', async () => {
    const solo1 = await scripted(await engine.session({ prompt: 'a red ball', seed: 31 }), PLAN);
    const solo2 = await scripted(await engine.session({ prompt: 'a blue room', seed: 32 }), [...PLAN].reverse());
    const t2v = {
      model: 'tiny-world',
      task: 'T2V' as const,
      inputs: { prompt: 'a ball in a room' },
      diffusion: { seed: 4, numFrames: 3, numInferenceSteps: 3 },
    };
    const soloVideo = finalOf(await lastValueFrom(engine.generate(t2v).pipe(toArray()))).artifacts.video;

    const [c1, c2, ev] = await Promise.all([
      engine.session({ prompt: 'a red ball', seed: 31 }).then((s) => scripted(s, PLAN)),
      engine.session({ prompt: 'a blue room', seed: 32 }).then((s) => scripted(s, [...PLAN].reverse())),
      lastValueFrom(engine.generate(t2v).pipe(toArray())),
    ]);
    const bytes = (cs: ChunkEvent[]) => cs.map((c) => Buffer.from(c.artifact.kind === 'video' ? c.artifact.frames : []).toString('base64'));
    expect(bytes(c1)).toEqual(bytes(solo1));
    expect(bytes(c2)).toEqual(bytes(solo2));
    expect(finalOf(ev).artifacts.video).toEqual(soloVideo);
  });

  it('flush during a chunk drops its attempt and redoes it with the new action, equal to a run that had the action from the start', async () => {
    const s = await engine.session({ prompt: 'a red ball', seed: 41 });
    const rec = record(s);
    s.credits.next(1);
    await rec.wait(isChunk(0));
    s.credits.next(1);
    // Chunk 1 starts with 'none'; after its first step, switch to 'left' and flush.
    const firstStep = await rec.wait((e) => e.type === 'step' && rec.chunks().length === 1);
    expect(firstStep).toMatchObject({ type: 'step', index: 0 });
    s.actions.next({ key: 'left' });
    s.flush();
    const c1 = (await rec.wait(isChunk(1))) as ChunkEvent;
    s.close();
    await rec.done;
    expect(c1.rollout?.action).toEqual({ key: 'left' });
    // Steps of chunk 1: step 0 (dropped attempt), then steps 0 and 1 of the new attempt.
    const afterFirst = rec.events.slice(rec.events.indexOf(rec.chunks()[0]) + 1, rec.events.indexOf(c1));
    expect(afterFirst.map((e) => (e.type === 'step' ? e.index : e.type))).toEqual([0, 0, 1]);

    const ref = await scripted(await engine.session({ prompt: 'a red ball', seed: 41 }), [{ key: 'none' }, { key: 'left' }]);
    expect(Buffer.from(c1.artifact.kind === 'video' ? c1.artifact.frames : [])).toEqual(
      Buffer.from(ref[1].artifact.kind === 'video' ? ref[1].artifact.frames : []),
    );
  });

  it("η re-noises every chunk's Euler steps: reported, seeded per chunk (a flushed attempt redraws the same noise), other frames than η 0", async () => {
    const plain = await scripted(await engine.session({ prompt: 'a red ball', seed: 51 }), PLAN);
    const explicitZero = await scripted(await engine.session({ prompt: 'a red ball', seed: 51, eta: 0 }), PLAN);
    expect(frames(explicitZero)).toEqual(frames(plain));
    const noisy = await scripted(await engine.session({ prompt: 'a red ball', seed: 51, eta: 1 }), PLAN);
    expect(frames(await scripted(await engine.session({ prompt: 'a red ball', seed: 51, eta: 1 }), PLAN))).toEqual(frames(noisy));
    frames(noisy).forEach((f, k) => expect({ k, same: f === frames(plain)[k] }).toEqual({ k, same: false }));

    // Flush chunk 1 after its first step and redo it with another action: equal to a run that had it from the start.
    const f = await engine.session({ prompt: 'a red ball', seed: 52, eta: 1 });
    const fr = record(f);
    f.credits.next(1);
    await fr.wait(isChunk(0));
    expect(fr.events[0]).toMatchObject({ type: 'admitted', params: { eta: 1 } });
    f.credits.next(1);
    await fr.wait((e) => e.type === 'step' && fr.chunks().length === 1);
    f.actions.next({ key: 'left' });
    f.flush();
    const c1 = (await fr.wait(isChunk(1))) as ChunkEvent;
    f.close();
    await fr.done;
    const ref = await scripted(await engine.session({ prompt: 'a red ball', seed: 52, eta: 1 }), [{ key: 'none' }, { key: 'left' }]);
    expect(frames([c1])).toEqual(frames([ref[1]]));
  });

  it("a model's world-session default η (defaults.world.eta, not its T2V one) applies to its sessions; a session's own η wins", async () => {
    const plan = PLAN.slice(0, 3);
    const byModel = await scripted(await engine.session({ model: 'tiny-world-eta', prompt: 'a red ball', seed: 53 }), plan);
    expect(frames(byModel)).toEqual(frames(await scripted(await engine.session({ prompt: 'a red ball', seed: 53, eta: 1 }), plan)));
    const bySession = await scripted(await engine.session({ model: 'tiny-world-eta', prompt: 'a red ball', seed: 53, eta: 0 }), plan);
    expect(frames(bySession)).toEqual(frames(await scripted(await engine.session({ prompt: 'a red ball', seed: 53 }), plan)));
  });

  it('close releases the session: slab pool usage and native memory return to where they were', async () => {
    const native = loadNative();
    // Warm up so lazily built shared state (model weights, plans of other tests) is already resident.
    await scripted(await engine.session({ prompt: 'a', seed: 1 }), [{ key: 'none' }]);
    const before = await settledBytesInUse(native);
    const s = await engine.session({ prompt: 'a', seed: 2 });
    const rec = record(s);
    s.credits.next(4);
    await rec.wait(isChunk(3));
    expect(inProcess(engine).caches.stats().chunkKv?.used).toBeGreaterThan(0);
    expect(s.stats().nativeBytes).toBeGreaterThan(0);
    s.close();
    await rec.done;
    await s.whenReleased();
    expect(inProcess(engine).caches.stats().chunkKv).toMatchObject({ used: 0, sessions: 0 });
    expect(s.stats()).toMatchObject({ nativeBytes: 0, closed: true });
    // settled as `before` was. Native memory is per process and the suite runs its files in one: a tensor an earlier
    // file dropped may be finalized only now (320 bytes were seen), so the check is that the session left nothing,
    // not that nothing else moved
    expect(await settledBytesInUse(native)).toBeLessThanOrEqual(before);
    expect(engine.stats().sessions).toBe(0);
  });

  it('image-to-world: chunk 0 is the encoded image decoded (action none, no denoise steps), then the rollout continues from it', async () => {
    const data = new Uint8Array(16 * 16 * 3);
    for (let i = 0; i < data.length; i += 3) data.set([200, 40, 40], i);
    const s = await engine.session({ prompt: 'a red ball', seed: 9, image: { width: 16, height: 16, data } });
    const rec = record(s);
    s.credits.next(2);
    await rec.wait(isChunk(1));
    s.close();
    const events = await rec.done;
    expect(events.slice(1, 5).map((e) => e.type)).toEqual(['chunk', 'step', 'step', 'chunk']);
    const plain = await scripted(await engine.session({ prompt: 'a red ball', seed: 9 }), [{ key: 'none' }, { key: 'none' }]);
    const img = rec.chunks();
    // Same seed and actions: the image changes chunk 0 and, through the KV cache and decoder state, chunk 1.
    for (const k of [0, 1]) {
      expect(
        Buffer.compare(
          Buffer.from(img[k].artifact.kind === 'video' ? img[k].artifact.frames : []),
          Buffer.from(plain[k].artifact.kind === 'video' ? plain[k].artifact.frames : []),
        ),
      ).not.toBe(0);
    }
  });

  it('a session of 2,000 frames runs in bounded memory: slab usage and native bytes are flat once the window is full', async () => {
    const native = loadNative();
    const s = await engine.session({ prompt: 'a ball', seed: 77 });
    const rec = record(s);
    const samples: Array<{ slabs: number; bytes: number }> = [];
    for (let k = 0; k < 2000; k += 100) {
      s.credits.next(100);
      await rec.wait(isChunk(k + 99));
      samples.push({ slabs: inProcess(engine).caches.stats().chunkKv!.used, bytes: native.stats().bytesInUse });
      rec.events.length = 0; // keep the test's own memory flat too
    }
    s.close();
    await rec.done;
    // Sink 1 + window 2 + 1 in flight = 4 chunks × 2 layers once full (from the first sample on).
    expect(new Set(samples.map((x) => x.slabs))).toEqual(new Set([8]));
    expect(new Set(samples.map((x) => x.bytes)).size).toBe(1);
  }, 120_000);
});

describe('Engine.session: hostile input', () => {
  it('rejects invalid session input naming the field', async () => {
    await expect(engine.session({ prompt: 'a', bogus: 1 } as never)).rejects.toMatchObject({ code: 'OMNIRX_ERR_INVALID_REQUEST' });
    await expect(engine.session({ prompt: 5 } as never)).rejects.toMatchObject({ code: 'OMNIRX_ERR_INVALID_REQUEST', param: 'prompt' });
    await expect(engine.session({ prompt: 'a', image: { width: 16, height: 16, data: new Uint8Array(10) } })).rejects.toMatchObject({ param: 'image.data' });
    await expect(engine.session({ prompt: 'a', width: 18 })).rejects.toMatchObject({ code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', param: 'width' });
    await expect(engine.session({ prompt: 'a', model: 'nope' })).rejects.toMatchObject({ code: 'OMNIRX_ERR_UNKNOWN_MODEL' });
    await expect(engine.session({ prompt: 'a', seed: -1 })).rejects.toMatchObject({ param: 'seed' });
    for (const eta of [-0.5, 1.5, Number.NaN, '1', null]) {
      await expect(engine.session({ prompt: 'a', eta: eta as number })).rejects.toMatchObject({ code: 'OMNIRX_ERR_INVALID_REQUEST', param: 'eta' });
    }
  });

  it('bad actions and credits throw a clear error and change nothing; the session keeps running', async () => {
    const s = await engine.session({ prompt: 'a', seed: 3 });
    const rec = record(s);
    const bad: unknown[] = [
      null,
      'up',
      { key: 'jump' },
      { key: 'up', vector: [1] },
      { key: 'up', vector: [Number.NaN, 0] },
      // finite as float64, but past float32's range (and past the bound, which keeps the model's activations finite)
      { key: 'up', vector: [1e39, 0] },
      { key: 'up', vector: [0, -1001] },
      { key: 'up', extra: 1 },
      { key: 'up', id: 'x'.repeat(65) },
    ];
    for (const a of bad) expect(() => s.actions.next(a)).toThrow(expect.objectContaining({ code: 'OMNIRX_ERR_INVALID_REQUEST' }));
    expect(() => s.actions.next({ key: 'jump' })).toThrow(/action\.key/);
    expect(() => s.actions.next({ key: 'up', vector: [0, 1e20] })).toThrow(expect.objectContaining({ param: 'action.vector.1' }));
    for (const c of [0, -1, 1.5, Number.NaN, Number.MAX_VALUE])
      expect(() => s.credits.next(c)).toThrow(expect.objectContaining({ code: 'OMNIRX_ERR_INVALID_REQUEST', param: 'credits' }));
    s.credits.next(1);
    const c0 = (await rec.wait(isChunk(0))) as ChunkEvent;
    expect(c0.rollout?.action).toEqual({ key: 'none' });
    // the bound itself is taken and the chunk made with it completes (a value that overflowed would end the session)
    s.actions.next({ key: 'up', vector: [1000, -1000] });
    s.credits.next(1);
    const c1 = (await rec.wait(isChunk(1))) as ChunkEvent;
    expect(c1.rollout?.action).toEqual({ key: 'up', vector: [1000, -1000] });
    s.close();
    await rec.done;
    expect(rec.events.filter((e) => e.type === 'error')).toEqual([]);
    await s.whenReleased();
  });

  it('a model without an action module refuses actions but runs sessions', async () => {
    const s = await engine.session({ prompt: 'a', model: 'tiny', seed: 3 });
    expect(() => s.actions.next({ key: 'up' })).toThrow(expect.objectContaining({ code: 'OMNIRX_ERR_UNSUPPORTED_VALUE' }));
    const rec = record(s);
    s.credits.next(1);
    await rec.wait(isChunk(0));
    s.close();
    await rec.done;
    await s.whenReleased();
  });

  it('events$ has one consumer; maxSessions and the chunk-KV budget are enforced per session', async () => {
    const s = await engine.session({ prompt: 'a', seed: 1 });
    const rec = record(s);
    const second = await lastValueFrom(s.events$.pipe(toArray()));
    expect(second).toEqual([expect.objectContaining({ type: 'error', code: 'OMNIRX_ERR_INVALID_REQUEST' })]);
    const more = [await engine.session({ prompt: 'a' }), await engine.session({ prompt: 'a' })];
    await expect(engine.session({ prompt: 'a' })).rejects.toMatchObject({ code: 'OMNIRX_ERR_QUEUE_FULL' });
    await expect(engine.session({ prompt: 'a', sessionId: s.id })).rejects.toMatchObject({ param: 'sessionId' });
    for (const m of [s, ...more]) m.close();
    await rec.done;
    await Promise.all([s, ...more].map((m) => m.whenReleased()));

    const small = await Engine.create({
      families: builtinFamilies(),
      modelsDir,
      defaultModel: 'tiny-world',
      caches: { chunkKvBytes: 4 * 2 * 1 * 16 * 32 * 2 * 4 },
      sessions: { localWindowFrames: 2 },
    });
    try {
      const ok = await small.session({ prompt: 'a' });
      await expect(small.session({ prompt: 'a' })).rejects.toMatchObject({ code: 'OMNIRX_ERR_CACHE_EXHAUSTED' });
      ok.close();
      await ok.whenReleased();
      const again = await small.session({ prompt: 'a' });
      again.close();
    } finally {
      await small.close();
    }
  });

  it('engine.close() while a session is still encoding its prompt resolves only once that native call has returned and freed its bytes', async () => {
    const native = loadNative();
    const baseline = await settledBytesInUse(native);
    const e = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny-world' });
    const s = await e.session({ prompt: 'a red ball in a blue room', seed: 9 });
    const rec = record(s);
    s.credits.next(1);
    await new Promise((r) => setImmediate(r)); // the subscription has started the prompt encoding
    await e.close();
    expect(native.stats()).toMatchObject({ queued: 0, running: 0, bytesInUse: baseline });
    expect((await rec.done).at(-1)).toMatchObject({ type: 'final' });
    expect(s.closed).toBe(true);
  });

  it('an idle session expires with OMNIRX_ERR_SESSION_EXPIRED and frees its slabs', async () => {
    const quick = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny-world', sessions: { idleTimeoutMs: 100 } });
    try {
      const s = await quick.session({ prompt: 'a', seed: 1 });
      const rec = record(s);
      s.credits.next(1);
      await rec.wait(isChunk(0));
      const events = await rec.done;
      expect(events[events.length - 1]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_SESSION_EXPIRED' });
      await s.whenReleased();
      expect(inProcess(quick).caches.stats().chunkKv).toMatchObject({ used: 0 });
      // A session nobody ever subscribes to expires as well, giving its reservation back.
      const unused = await quick.session({ prompt: 'a' });
      expect(quick.stats().sessions).toBe(1);
      await unused.whenReleased();
      expect(unused.closed).toBe(true);
      expect(quick.stats().sessions).toBe(0);
    } finally {
      await quick.close();
    }
  });

  it('a deployment without WORLD refuses sessions and creates no chunk-KV pool', async () => {
    const t2v = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', tasks: ['T2V'] });
    try {
      await expect(t2v.session({ prompt: 'a' })).rejects.toMatchObject({ code: 'OMNIRX_ERR_UNSUPPORTED_VALUE' });
      expect(inProcess(t2v).caches.stats().chunkKv).toBeUndefined();
      expect(inProcess(t2v).caches.stats().tokenKv).toBeUndefined();
    } finally {
      await t2v.close();
    }
  });
});
