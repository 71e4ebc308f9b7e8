/**
 * Three places where the disaggregated front once drifted from the engine's, each checked on the one front the engine
 * now is, over in-process stages (the same executor and payloads as stage processes, without forking):
 *  1. the deployment's conditioning policy reaches the stages (a session's actions go through the injector the engine
 *     was given, not a hard-coded one);
 *  2. the deploy config's cache budgets reach the stages (Encode's feature cache, Denoise's chunk-KV pool);
 *  3. a disaggregated session reserves its chunk-KV slabs when it opens, as an in-process one does.
 */
import { lastValueFrom, toArray } from 'rxjs';
import { Engine, type EngineOptions } from '../../src/engine/engine';
import type { WorldSession } from '../../src/engine/session';
import { builtinFamilies } from '../../src/families';
import type { ModelSpec } from '../../src/families/wan/model-spec';
import { actionAdaLNInjector, type ConditioningInjector } from '../../src/pipeline/policies/conditioning-injector';
import { SessionConfigSchema } from '../../src/pipeline/session-config';
import { StageExecutor } from '../../src/placement/stage-executor';
import { TopologySchema } from '../../src/placement/topology';
import type { Action } from '../../src/request/action';
import type { ChunkEvent, OmniEvent } from '../../src/request/omni-event';
import { makeModelsDir, tinyWorldSpec } from '../helpers/tiny-model';

const sessions = { chunkFrames: 1, sinkFrames: 1, localWindowFrames: 2, steps: 2, firstChunkSteps: 3 };
const stages = TopologySchema.parse({ kind: 'disaggregated', connector: 'in-process' });
let modelsDir: string;

beforeAll(async () => {
  modelsDir = await makeModelsDir([{ spec: tinyWorldSpec(), seed: 3 }]);
});

const open = (options: Partial<EngineOptions> = {}) =>
  Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny-world', sessions, ...options });

/** Runs one chunk per action (action k set before the credit of chunk k), then closes; the chunk events. */
async function chunks(s: WorldSession, actions: Action[]): Promise<ChunkEvent[]> {
  const events: OmniEvent[] = [];
  let wake = () => undefined as void;
  const done = new Promise<void>((resolve) => s.events$.subscribe({ next: (e) => (events.push(e), wake()), complete: resolve }));
  const got = () => events.filter((e): e is ChunkEvent => e.type === 'chunk');
  for (const [k, a] of actions.entries()) {
    s.actions.next(a);
    s.credits.next(1);
    while (got().length <= k && events.at(-1)?.type !== 'error') await new Promise<void>((r) => (wake = r));
  }
  s.close();
  await done;
  return got();
}

const frames = (c: ChunkEvent) => Buffer.from(c.artifact.kind === 'video' ? c.artifact.frames : []);

describe('the disaggregated topology keeps what the engine was given', () => {
  it('1. the conditioning policy: a session on the stages feeds its actions through the deployment injector', async () => {
    // Maps "up" to "down" (and back) before the model sees it; the chunk event still echoes the caller's action.
    const swapped: ConditioningInjector = {
      slot: 'conditioning',
      name: 'swap-up-down',
      chunkActions: (a, frames, model) => {
        const swap = (x: Action): Action => ({ ...x, key: x.key === 'up' ? 'down' : x.key === 'down' ? 'up' : x.key });
        return actionAdaLNInjector.chunkActions(a === undefined ? undefined : Array.isArray(a) ? a.map(swap) : swap(a as Action), frames, model);
      },
    };
    const mono = await open();
    const staged = await open({ topology: stages, policies: { conditioning: swapped } });
    try {
      const reference = await chunks(await mono.session({ prompt: 'a red ball', seed: 5 }), [{ key: 'none' }, { key: 'down' }]);
      const plainUp = await chunks(await mono.session({ prompt: 'a red ball', seed: 5 }), [{ key: 'none' }, { key: 'up' }]);
      const got = await chunks(await staged.session({ prompt: 'a red ball', seed: 5 }), [{ key: 'none' }, { key: 'up' }]);
      expect(frames(plainUp[1]).equals(frames(reference[1]))).toBe(false); // up and down differ for this model
      expect(got[1].rollout?.action).toEqual({ key: 'up' });
      expect(frames(got[1]).equals(frames(reference[1]))).toBe(true);
      expect(frames(got[0]).equals(frames(reference[0]))).toBe(true);
    } finally {
      await staged.close();
      await mono.close();
    }
  });

  it('2. the cache budgets: Encode keeps the configured feature cache and Denoise the configured chunk-KV pool', async () => {
    const spec = tinyWorldSpec() as ModelSpec;
    const kv = builtinFamilies()[0].sessions!.kv(
      spec,
      { width: 16, height: 16, fps: 20, seed: 1, flowShift: 2, eta: 0, priority: 1 },
      SessionConfigSchema.parse(sessions),
    );
    const budgets = { chunkKvBytes: 3 * kv.slabs * kv.slabBytes + 7, featureCacheBytes: 123_456 };
    const staged = await open({ topology: stages, caches: budgets });
    try {
      const t2v = { model: 'tiny-world', task: 'T2V' as const, inputs: { prompt: 'a blue ball' }, diffusion: { seed: 1, numInferenceSteps: 2 } };
      for (let i = 0; i < 2; i++) expect((await lastValueFrom(staged.generate(t2v).pipe(toArray()))).at(-1)?.type).toBe('final');
      const s = await staged.session({ prompt: 'a', seed: 1 });
      await chunks(s, [{ key: 'none' }]);
      const mem = await (staged.executor as StageExecutor).memory();
      expect(mem.encode.caches.budgets).toMatchObject(budgets);
      expect(mem.encode.caches.features?.hits).toBeGreaterThan(0); // the repeated prompt skipped Encode's text encoder
      expect(mem.encode.caches.features!.bytes).toBeLessThanOrEqual(budgets.featureCacheBytes);
      expect(mem.denoise.caches.budgets.chunkKvBytes).toBe(budgets.chunkKvBytes);
      expect(mem.denoise.caches.chunkKv).toMatchObject({ slabs: Math.floor(budgets.chunkKvBytes / kv.slabBytes), slabBytes: kv.slabBytes });
      expect(mem.decode.caches.chunkKv).toBeUndefined();
    } finally {
      await staged.close();
    }
  });

  it('3. the slab reservation: a session the chunk-KV budget cannot hold beside the open ones is refused when it opens', async () => {
    const spec = tinyWorldSpec() as ModelSpec;
    const kv = builtinFamilies()[0].sessions!.kv(
      spec,
      { width: 16, height: 16, fps: 20, seed: 1, flowShift: 2, eta: 0, priority: 1 },
      SessionConfigSchema.parse(sessions),
    );
    const staged = await open({ topology: stages, caches: { chunkKvBytes: kv.slabs * kv.slabBytes } });
    try {
      const first = await staged.session({ prompt: 'a' });
      await expect(staged.session({ prompt: 'a' })).rejects.toMatchObject({ code: 'OMNIRX_ERR_CACHE_EXHAUSTED' });
      first.close();
      await first.whenReleased();
      const again = await staged.session({ prompt: 'a', seed: 2 });
      const got = await chunks(again, [{ key: 'none' }, { key: 'left' }, { key: 'up' }, { key: 'right' }]);
      expect(got.map((c) => c.rollout?.chunk)).toEqual([0, 1, 2, 3]); // the window recycles its slabs: no failure mid-rollout
    } finally {
      await staged.close();
    }
  });
});
