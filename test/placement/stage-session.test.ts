import * as path from 'node:path';
import { Engine } from '../../src/engine/engine';
import { loadNative } from '../../src/native/binding';
import { SessionConfigSchema } from '../../src/pipeline/session-config';
import { StageExecutor } from '../../src/placement/stage-executor';
import { TopologySchema, type Topology } from '../../src/placement/topology';
import type { ChunkEvent, OmniEvent } from '../../src/request/omni-event';
import { makeModelsDir, tinyWorldSpec } from '../helpers/tiny-model';
import { builtinFamilies } from '../../src/families';

// Stage processes run compiled JS (see stage-processes.test.ts): dist/ from `npm test`'s pretest, or OMNIRX_STAGE_ENTRY.
const entry = process.env.OMNIRX_STAGE_ENTRY ?? path.resolve(__dirname, '../../dist/src/placement/stage-main.js');

type Key = 'none' | 'up' | 'down' | 'left' | 'right';
const PLAN: Array<{ key: Key; id: string; vector?: [number, number] }> = (
  ['none', 'up', 'up', 'left', 'down', 'right', 'none', 'left', 'right', 'up'] as Key[]
).map((key, i) => ({ key, id: `a${i}`, ...(i === 4 ? { vector: [0.5, -0.25] as [number, number] } : {}) }));
const sessions = SessionConfigSchema.parse({ chunkFrames: 1, sinkFrames: 1, localWindowFrames: 2, steps: 2 });

interface Handle {
  events$: { subscribe(o: { next: (e: OmniEvent) => void; complete: () => void }): unknown };
  actions: { next(a: unknown): void };
  credits: { next(n: number): void };
  close(): void;
}

/** Collects a session's events; `wait(pred)` resolves with the next event matching `pred` (checked synchronously). */
class Recorder {
  readonly events: OmniEvent[] = [];
  private waiters: Array<{ pred: (e: OmniEvent) => boolean; resolve: (e: OmniEvent) => void }> = [];
  readonly done: Promise<OmniEvent[]>;

  constructor(s: Handle) {
    this.done = new Promise((resolve) => s.events$.subscribe({ next: (e) => this.push(e), complete: () => resolve(this.events) }));
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

const isChunk = (n: number) => (e: OmniEvent) => e.type === 'chunk' && e.rollout?.chunk === n;
const frameBytes = (c: ChunkEvent) => Buffer.from(c.artifact.kind === 'video' ? c.artifact.frames : new Uint8Array());

/** Runs the plan: action k is set before the credit of chunk k, and chunk k is awaited before k+1. */
async function scripted(
  s: Handle,
  plan: ReadonlyArray<{ key: Key; id?: string; vector?: [number, number] }> = PLAN,
): Promise<{ chunks: ChunkEvent[]; last: OmniEvent }> {
  const events: OmniEvent[] = [];
  let notify: () => void = () => undefined;
  const done = new Promise<void>((resolve) => s.events$.subscribe({ next: (e) => (events.push(e), notify()), complete: resolve }));
  const chunks = () => events.filter((e): e is ChunkEvent => e.type === 'chunk');
  for (let k = 0; k < plan.length; k++) {
    s.actions.next(plan[k]);
    s.credits.next(1);
    while (chunks().length <= k && events[events.length - 1]?.type !== 'error') await new Promise<void>((r) => (notify = r));
  }
  s.close();
  await done;
  return { chunks: chunks(), last: events[events.length - 1] };
}

const inProcess = () => TopologySchema.parse({ kind: 'disaggregated', connector: 'in-process' });
const view = (c: ChunkEvent) => ({
  rollout: c.rollout,
  frames: Buffer.from(c.artifact.kind === 'video' ? c.artifact.frames : new Uint8Array()).toString('base64'),
});

let modelsDir: string;
let engine: Engine;
let reference: ChunkEvent[];
const native = loadNative();
/** An engine on the stages of `topology` serving the tiny world model's sessions. */
const staged = (topology: Topology, over: { sessions?: typeof sessions } = {}) =>
  Engine.create({
    families: builtinFamilies(),
    native,
    modelsDir,
    defaultModel: 'tiny-world',
    tasks: ['T2V', 'WORLD'],
    sessions,
    ...over,
    topology,
    stageEntry: entry,
  });
/** What each stage of `e` holds. */
const memory = (e: Engine) => (e.executor as StageExecutor).memory();

beforeAll(async () => {
  modelsDir = await makeModelsDir([{ spec: tinyWorldSpec(), seed: 3 }]);
  engine = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny-world', native, sessions });
  const r = await scripted(await engine.session({ prompt: 'a red ball in a blue room', seed: 21, fps: 10 }));
  expect(r.last.type).toBe('final');
  reference = r.chunks;
});

afterAll(async () => {
  await engine.close();
});

describe('world sessions across stages', () => {
  it('in-process: 10 chunks bit-identical to the monolithic session (frames and actions)', async () => {
    const stages = await staged(inProcess());
    try {
      const r = await scripted(await stages.session({ prompt: 'a red ball in a blue room', seed: 21, fps: 10 }));
      expect(r.last.type).toBe('final');
      expect(r.chunks.length).toBe(PLAN.length);
      expect(r.chunks.map(view)).toEqual(reference.map(view));
    } finally {
      await stages.close();
    }
  });

  it('in-process at η 1: the spec carries η to Denoise, bit-identical to the monolithic session at η 1', async () => {
    const mono = await scripted(await engine.session({ prompt: 'a red ball in a blue room', seed: 21, fps: 10, eta: 1 }));
    expect(mono.chunks.map(view)).not.toEqual(reference.map(view));
    const stages = await staged(inProcess());
    try {
      const r = await scripted(await stages.session({ prompt: 'a red ball in a blue room', seed: 21, fps: 10, eta: 1 }));
      expect(r.chunks.map(view)).toEqual(mono.chunks.map(view));
    } finally {
      await stages.close();
    }
  });

  it('separate processes over shm: 10 chunks bit-identical; Denoise alone holds the KV', async () => {
    const sp = await staged(TopologySchema.parse({ kind: 'disaggregated', connector: 'shm' }));
    try {
      const r = await scripted(await sp.session({ prompt: 'a red ball in a blue room', seed: 21, fps: 10 }));
      expect(r.last.type).toBe('final');
      expect(r.chunks.map(view)).toEqual(reference.map(view));
      expect((await memory(sp)).denoise.encoderBytes).toBe(0);
    } finally {
      await sp.close();
    }
  });

  it('refuses off-stride sizes at open, and keeps serving', async () => {
    const stages = await staged(inProcess());
    try {
      await expect(stages.session({ prompt: 'a', width: 18 })).rejects.toMatchObject({ code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', param: 'width' });
      const r = await scripted(await stages.session({ prompt: 'a red ball in a blue room', seed: 21, fps: 10 }));
      expect(r.chunks.map(view)).toEqual(reference.map(view));
    } finally {
      await stages.close();
    }
  });

  it('image-to-world: chunk 0 is the encoded image, then the rollout goes on; bit-identical to the monolithic session', async () => {
    const data = new Uint8Array(16 * 16 * 3).map((_, i) => (i * 37 + (i >> 4) * 11) & 255);
    const image = { width: 16, height: 16, data };
    const mono = await scripted(await engine.session({ prompt: 'a red ball', seed: 9, image }));
    const stages = await staged(inProcess());
    try {
      const r = await scripted(await stages.session({ prompt: 'a red ball', seed: 9, image }));
      expect(r.last.type).toBe('final');
      expect(r.chunks[0].rollout?.action).toEqual({ key: 'none' });
      expect(r.chunks.map(view)).toEqual(mono.chunks.map(view));
    } finally {
      await stages.close();
    }
  });

  it('flush during a chunk drops its attempt (never decoded) and redoes it with the new action, equal to the monolithic run that had the action from the start', async () => {
    const stages = await staged(inProcess());
    try {
      const s = await stages.session({ prompt: 'a red ball', seed: 41 });
      const rec = new Recorder(s);
      s.credits.next(1);
      await rec.wait(isChunk(0));
      s.credits.next(1);
      // Chunk 1 starts with 'none'; once Denoise reports its first step, switch to 'left' and flush.
      const firstStep = await rec.wait((e) => e.type === 'step' && rec.chunks().length === 1);
      expect(firstStep).toMatchObject({ type: 'step', node: 'chunk_rollout', index: 0, total: 2 });
      s.actions.next({ key: 'left' });
      s.flush();
      const c1 = (await rec.wait(isChunk(1))) as ChunkEvent;
      s.close();
      const events = await rec.done;
      expect(events[events.length - 1].type).toBe('final');
      expect(c1.rollout?.action).toEqual({ key: 'left' });
      // Chunk 1: step 0 of the dropped attempt, then steps 0 and 1 of the new one; one chunk event only.
      const between = events.slice(events.indexOf(rec.chunks()[0]) + 1, events.indexOf(c1));
      expect(between.map((e) => (e.type === 'step' ? e.index : e.type))).toEqual([0, 0, 1]);
      expect(rec.chunks().map((c) => c.rollout?.chunk)).toEqual([0, 1]);

      const mono = await scripted(await engine.session({ prompt: 'a red ball', seed: 41 }), [{ key: 'none' }, { key: 'left' }]);
      expect(frameBytes(c1)).toEqual(frameBytes(mono.chunks[1]));
      expect(frameBytes(rec.chunks()[0])).toEqual(frameBytes(mono.chunks[0]));
    } finally {
      await stages.close();
    }
  });

  it('a flush between chunks only updates the action; the next chunk uses it', async () => {
    const stages = await staged(inProcess());
    try {
      const s = await stages.session({ prompt: 'a red ball', seed: 41 });
      const rec = new Recorder(s);
      s.credits.next(1);
      await rec.wait(isChunk(0));
      s.actions.next({ key: 'left', id: 'k1' });
      s.flush();
      s.credits.next(1);
      const c1 = (await rec.wait(isChunk(1))) as ChunkEvent;
      s.close();
      await rec.done;
      expect(c1.rollout?.action).toEqual({ key: 'left', id: 'k1' });
      const mono = await scripted(await engine.session({ prompt: 'a red ball', seed: 41 }), [{ key: 'none' }, { key: 'left' }]);
      expect(frameBytes(c1)).toEqual(frameBytes(mono.chunks[1]));
    } finally {
      await stages.close();
    }
  });

  it('an idle session expires with OMNIRX_ERR_SESSION_EXPIRED and the stages free its KV and decoder state; so does one nobody subscribes to', async () => {
    const stages = await staged(inProcess(), { sessions: { ...sessions, idleTimeoutMs: 100 } });
    try {
      const s = await stages.session({ prompt: 'a', seed: 1 });
      const rec = new Recorder(s);
      s.credits.next(1);
      await rec.wait(isChunk(0));
      const held = await memory(stages);
      expect(held.denoise.sessions.open).toBe(1);
      expect(held.decode.sessions.open).toBe(1);
      const events = await rec.done;
      expect(events[events.length - 1]).toMatchObject({ type: 'error', requestId: s.id, code: 'OMNIRX_ERR_SESSION_EXPIRED' });
      await s.whenReleased();
      const freed = await memory(stages);
      expect(freed.denoise.sessions).toEqual({ open: 0, chunkKvSlabs: 0 });
      expect(freed.decode.sessions.open).toBe(0);
      // Ended: feeding it is a no-op, not an exception.
      expect(() => (s.actions.next({ key: 'up' }), s.credits.next(1), s.flush(), s.close())).not.toThrow();

      const unused = await stages.session({ prompt: 'a' });
      expect((await memory(stages)).denoise.sessions.open).toBe(1);
      await unused.whenReleased();
      expect(unused.closed).toBe(true);
      expect((await memory(stages)).denoise.sessions).toEqual({ open: 0, chunkKvSlabs: 0 });
    } finally {
      await stages.close();
    }
  });
});
