import { readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { firstValueFrom, lastValueFrom, toArray, filter, take } from 'rxjs';
import { Engine } from '../../src/engine/engine';
import { CFGPolicy } from '../../src/pipeline/policies/cfg';
import { CostModel } from '../../src/executor/scheduler';
import type { OmniEvent } from '../../src/request/omni-event';
import type { OmniRequestInput } from '../../src/request/omni-request';
import { finalOf } from '../helpers/events';
import { settledBytesInUse } from '../helpers/native-memory';
import { makeModelsDir, poisonToOverflow, tinySpec } from '../helpers/tiny-model';
import { builtinFamilies } from '../../src/families';
import { loadNative } from '../../src/native/binding';
import { inProcess, loadedWan } from '../helpers/engine';

const native = loadNative();

let modelsDir: string;
let engine: Engine;

const req = (over: Partial<OmniRequestInput['diffusion']> = {}, extra: Partial<OmniRequestInput> = {}): OmniRequestInput => ({
  model: 'tiny',
  task: 'T2V',
  inputs: { prompt: 'a red ball in a blue room' },
  diffusion: { seed: 7, ...over },
  ...extra,
});

const run = (r: OmniRequestInput): Promise<OmniEvent[]> => lastValueFrom(engine.generate(r).pipe(toArray()));

/** The request's `admitted` event. */
const admittedOf = (events: OmniEvent[]) => {
  const a = events.find((e) => e.type === 'admitted');
  if (a?.type !== 'admitted') throw new Error('no admitted event');
  return a;
};

/** The bytes of the request's final video. */
const bytes = (events: OmniEvent[]) => {
  const v = finalOf(events).artifacts.video;
  if (v.kind !== 'video') throw new Error('expected a video');
  return Buffer.from(v.frames);
};

beforeAll(async () => {
  // A second model whose DiT output weights overflow to non-finite values, and a third whose transformer file is truncated.
  const nanSpec = tinySpec('tiny-nan');
  const brokenSpec = tinySpec('tiny-broken');
  modelsDir = await makeModelsDir([
    { spec: nanSpec, seed: 1 },
    { spec: brokenSpec, seed: 1 },
  ]);
  poisonToOverflow(modelsDir, 'tiny-nan');
  const brokenFile = path.join(modelsDir, 'tiny-broken', 'transformer.safetensors');
  const raw = readFileSync(brokenFile);
  writeFileSync(brokenFile, raw.subarray(0, raw.length - 100));
  engine = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny' });
});

afterAll(async () => {
  await engine.close();
});

describe('Engine.generate', () => {
  it('emits queued → admitted → node events with one step event per denoise step → final with the video', async () => {
    const events = await run(req({ numInferenceSteps: 3, numFrames: 3, fps: 6 }));
    expect(events.map((e) => (e.type === 'node_start' || e.type === 'node_end' ? `${e.type}:${e.node}` : e.type))).toEqual([
      'queued',
      'admitted',
      'node_start:text_encoder',
      'node_end:text_encoder',
      'node_start:denoise',
      'step',
      'step',
      'step',
      'node_end:denoise',
      'node_start:decode_video',
      'node_end:decode_video',
      'final',
    ]);
    const steps = events.filter((e) => e.type === 'step');
    expect(steps.map((s) => (s.type === 'step' ? [s.index, s.total] : []))).toEqual([
      [0, 3],
      [1, 3],
      [2, 3],
    ]);
    // flow shift 2, N = 3: σ = 1, 2·(2/3)/(1 + 2/3) = 0.8, 2·(1/3)/(1 + 1/3) = 0.5
    const sigmas = steps.map((s) => (s.type === 'step' ? s.sigma : NaN));
    expect(sigmas[0]).toBe(1);
    expect(sigmas[1]).toBeCloseTo(0.8, 12);
    expect(sigmas[2]).toBeCloseTo(0.5, 12);
    const admitted = events[1];
    expect(admitted.type === 'admitted' && admitted.params).toMatchObject({
      width: 16,
      height: 16,
      numFrames: 3,
      fps: 6,
      numInferenceSteps: 3,
      seed: 7,
      guidanceScale: 4,
      flowShift: 2,
    });
    expect(admitted.type === 'admitted' && admitted.estimate).toMatchObject({ steps: 3, forwards: 6, ms: expect.any(Number) });
    const out = finalOf(events);
    const video = out.artifacts.video;
    expect(video.kind).toBe('video');
    if (video.kind !== 'video') return;
    expect([video.width, video.height, video.numFrames, video.fps]).toEqual([16, 16, 3, 6]);
    expect(video.frames.length).toBe(3 * 16 * 16 * 3);
    expect(out.seed).toBe(7);
  });

  it('is deterministic: the same prompt and seed give byte-identical frames, another seed different frames', async () => {
    const a = finalOf(await run(req({ seed: 123 }))).artifacts.video;
    const b = finalOf(await run(req({ seed: 123 }))).artifacts.video;
    const c = finalOf(await run(req({ seed: 124 }))).artifacts.video;
    if (a.kind !== 'video' || b.kind !== 'video' || c.kind !== 'video') throw new Error('expected videos');
    expect(Buffer.from(a.frames).equals(Buffer.from(b.frames))).toBe(true);
    expect(Buffer.from(a.frames).equals(Buffer.from(c.frames))).toBe(false);
  });

  it('the prompt conditions the output (different prompt, same seed → different frames)', async () => {
    const a = finalOf(await run(req({ seed: 5 }))).artifacts.video;
    const b = finalOf(await run(req({ seed: 5 }, { inputs: { prompt: 'a blue ball' } }))).artifacts.video;
    if (a.kind !== 'video' || b.kind !== 'video') throw new Error('expected videos');
    expect(Buffer.from(a.frames).equals(Buffer.from(b.frames))).toBe(false);
  });

  it('T2I returns an image; returnLatents adds the final latents [C, F, h, w]', async () => {
    const out = finalOf(
      await run({ model: 'tiny', task: 'T2I', inputs: { prompt: 'a ball' }, diffusion: { seed: 1, width: 24, height: 16 }, outputs: { returnLatents: true } }),
    );
    expect(out.artifacts.image).toMatchObject({ kind: 'image', width: 24, height: 16 });
    expect(out.artifacts.image.kind === 'image' && out.artifacts.image.pixels.length).toBe(24 * 16 * 3);
    expect(out.artifacts.latents).toMatchObject({ kind: 'latents', shape: [4, 1, 8, 12] });
  });

  it('outputs.previewEvery emits the predicted first frame as chunk previews, never on the last step', async () => {
    const events = await run(req({ numInferenceSteps: 5, numFrames: 3, width: 24, height: 16 }, { outputs: { previewEvery: 2 } }));
    const order = events.filter((e) => e.type === 'step' || e.type === 'chunk').map((e) => (e.type === 'step' ? `step${e.index}` : `chunk:${e.node}`));
    // Steps 2 and 4 of 5 (index 1 and 3): each preview follows its step's event; none after the last step.
    expect(order).toEqual(['step0', 'step1', 'chunk:denoise', 'step2', 'step3', 'chunk:denoise', 'step4']);
    for (const e of events) {
      if (e.type === 'chunk') expect(e.artifact).toMatchObject({ kind: 'image', width: 24, height: 16, pixels: expect.any(Uint8Array) });
    }
    expect(finalOf(events).artifacts.video).toMatchObject({ numFrames: 3 });
    const admitted = events.find((e) => e.type === 'admitted');
    expect(admitted?.type === 'admitted' && admitted.params.previewEvery).toBe(2);
  });

  it('a preview is the frame one Euler step to σ = 0 would give: equal to frame 0 of a run with sigmas [σ₀, 0]', async () => {
    // x̂₀ = x_t − σ·v is exactly the Euler step from σ to 0, so the preview after the first step of [1, 0.5, 0] must be,
    // bit for bit, the first frame of the one-step run [1, 0] (same seed: same noise and the same velocity at σ = 1).
    const two = await run(req({ numFrames: 3, width: 24, height: 16 }, { outputs: { previewEvery: 1 }, nodeParams: { denoise: { sigmas: [1, 0.5, 0] } } }));
    const previews = two.filter((e) => e.type === 'chunk');
    expect(previews).toHaveLength(1);
    const one = finalOf(await run(req({ numFrames: 3, width: 24, height: 16 }, { nodeParams: { denoise: { sigmas: [1, 0] } } })));
    const p = previews[0]!;
    const video = one.artifacts.video;
    expect(p.type === 'chunk' && p.artifact.kind === 'image' && video?.kind === 'video').toBe(true);
    if (p.type !== 'chunk' || p.artifact.kind !== 'image' || video?.kind !== 'video') return;
    expect(Buffer.from(p.artifact.pixels).equals(Buffer.from(video.frames.subarray(0, 24 * 16 * 3)))).toBe(true);
    // …and not the final video of the two-step run (the preview is the prediction, not the result).
    const final = finalOf(two).artifacts.video;
    expect(final?.kind === 'video' && Buffer.from(p.artifact.pixels).equals(Buffer.from(final.frames.subarray(0, 24 * 16 * 3)))).toBe(false);
  });

  it('guidance scale 1 runs one forward per step', async () => {
    const events = await run(req({ guidanceScale: 1, numInferenceSteps: 2 }));
    const admitted = events.find((e) => e.type === 'admitted');
    expect(admitted?.type === 'admitted' && admitted.estimate).toMatchObject({ steps: 2, forwards: 2 });
    finalOf(events);
  });

  describe('guidance interval', () => {
    /** The step previews' pixels (previewEvery 1: the clean first frame each step predicts from its guided velocity). */
    const previews = (events: OmniEvent[]) =>
      events.flatMap((e) => (e.type === 'chunk' && e.artifact.kind === 'image' ? [Buffer.from(e.artifact.pixels)] : []));

    it('guides only the steps whose fraction i/N lies in [start, end), reports the interval and counts the forwards', async () => {
      const all = await run(req({ numInferenceSteps: 4 }, { outputs: { previewEvery: 1 } }));
      const none = await run(req({ numInferenceSteps: 4, guidanceScale: 1 }, { outputs: { previewEvery: 1 } }));
      const early = await run(req({ numInferenceSteps: 4, guidanceInterval: [0, 0.5] }, { outputs: { previewEvery: 1 } }));
      const late = await run(req({ numInferenceSteps: 4, guidanceInterval: [0.5, 1] }, { outputs: { previewEvery: 1 } }));
      // Defaults: every step guided (the deployment's [0, 1]), two forwards each.
      expect(admittedOf(all).params).toMatchObject({ guidanceScale: 4, guidanceIntervalStart: 0, guidanceIntervalEnd: 1 });
      expect(admittedOf(all).estimate).toMatchObject({ steps: 4, forwards: 8 });
      expect(admittedOf(early).params).toMatchObject({ guidanceIntervalStart: 0, guidanceIntervalEnd: 0.5 });
      expect(admittedOf(early).estimate).toMatchObject({ steps: 4, forwards: 6 });
      expect(admittedOf(late).estimate).toMatchObject({ steps: 4, forwards: 6 });
      const [pa, pn, pe, pl] = [all, none, early, late].map(previews);
      expect(pa).toHaveLength(3); // steps 0–2: the last step's prediction is the final video, not previewed
      // [0, 0.5) of 4 steps guides steps 0 and 1: their predictions are the fully guided run's, step 2's is not.
      expect(pe[0].equals(pa[0]) && pe[1].equals(pa[1])).toBe(true);
      expect(pe[2].equals(pa[2])).toBe(false);
      // [0.5, 1) guides steps 2 and 3 only: steps 0 and 1 are the unguided run's.
      expect(pl[0].equals(pn[0]) && pl[1].equals(pn[1])).toBe(true);
      expect(pl[2].equals(pn[2])).toBe(false);
      expect(bytes(early).equals(bytes(all))).toBe(false);
      expect(bytes(early).equals(bytes(none))).toBe(false);
    });

    it('[0, 1] is the default; an empty interval is guidance scale 1 (one forward a step, the same bytes)', async () => {
      const all = await run(req({ numInferenceSteps: 3 }));
      const explicit = await run(req({ numInferenceSteps: 3, guidanceInterval: [0, 1] }));
      expect(bytes(explicit).equals(bytes(all))).toBe(true);
      const empty = await run(req({ numInferenceSteps: 3, guidanceInterval: [0.4, 0.4] }));
      const none = await run(req({ numInferenceSteps: 3, guidanceScale: 1 }));
      expect(admittedOf(empty).estimate).toMatchObject({ steps: 3, forwards: 3 });
      expect(bytes(empty).equals(bytes(none))).toBe(true);
    });

    it("a model's default interval applies when the request names none, and the request's wins over it", async () => {
      const dir = await makeModelsDir([{ spec: { ...tinySpec('tiny-gi'), defaults: { ...tinySpec().defaults, guidanceInterval: [0, 0.5] } }, seed: 1 }]);
      const e = await Engine.create({ families: builtinFamilies(), modelsDir: dir, defaultModel: 'tiny' });
      try {
        const go = (over: Partial<OmniRequestInput['diffusion']>) =>
          lastValueFrom(e.generate(req({ numInferenceSteps: 4, ...over }, { model: 'tiny-gi' })).pipe(toArray()));
        const byModel = await go({});
        expect(admittedOf(byModel).params).toMatchObject({ guidanceIntervalStart: 0, guidanceIntervalEnd: 0.5 });
        expect(admittedOf(byModel).estimate).toMatchObject({ forwards: 6 });
        // The same seed-1 weights as 'tiny', so the bytes are 'tiny''s at [0, 0.5).
        const tinyEarly = await lastValueFrom(e.generate(req({ numInferenceSteps: 4, guidanceInterval: [0, 0.5] })).pipe(toArray()));
        expect(bytes(byModel).equals(bytes(tinyEarly))).toBe(true);
        const byRequest = await go({ guidanceInterval: [0, 1] });
        expect(admittedOf(byRequest).params).toMatchObject({ guidanceIntervalStart: 0, guidanceIntervalEnd: 1 });
        expect(admittedOf(byRequest).estimate).toMatchObject({ forwards: 8 });
      } finally {
        await e.close();
      }
    });

    it("a deployment's CFG policy interval is the default when neither the request nor the model names one", async () => {
      const e = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', policies: { cfg: CFGPolicy.classic([0.5, 1]) } });
      try {
        const events = await lastValueFrom(e.generate(req({ numInferenceSteps: 4 })).pipe(toArray()));
        expect(admittedOf(events).params).toMatchObject({ guidanceIntervalStart: 0.5, guidanceIntervalEnd: 1 });
        expect(admittedOf(events).estimate).toMatchObject({ forwards: 6 });
        const late = await run(req({ numInferenceSteps: 4, guidanceInterval: [0.5, 1] }));
        expect(bytes(events).equals(bytes(late))).toBe(true);
      } finally {
        await e.close();
      }
    });

    it('an interval that holds no step i/N runs as scale 1: no negative prompt encoded, one forward a step, the same bytes', async () => {
      // 4 steps: i/N = 0, 0.25, 0.5, 0.75, none in [0.3, 0.45).
      const over = { numInferenceSteps: 4, seed: 21 };
      const gap = await run(req({ ...over, guidanceInterval: [0.3, 0.45] }));
      expect(admittedOf(gap).estimate).toMatchObject({ steps: 4, forwards: 4 });
      expect(bytes(gap).equals(bytes(await run(req({ ...over, guidanceScale: 1 }))))).toBe(true);
      // Native calls: each request encodes a prompt no other test encodes (the text feature cache cannot serve it) and,
      // were its negative prompt (also new) encoded, one call more.
      const calls = async (prompt: string, negativePrompt: string, d: Partial<OmniRequestInput['diffusion']>) => {
        const before = native.stats().completed;
        finalOf(await run(req({ ...over, ...d }, { inputs: { prompt, negativePrompt } })));
        return native.stats().completed - before;
      };
      const unguided = await calls('room room red ball', 'ball ball room', { guidanceScale: 1 });
      expect(await calls('room room blue ball', 'ball ball red', { guidanceInterval: [0.3, 0.45] })).toBe(unguided);
      // …and a guided step does encode it: one call more, plus the step's second forward.
      expect(await calls('room room red red', 'ball ball blue', { guidanceInterval: [0.25, 0.45] })).toBe(unguided + 2);
    });

    it('the admitted time estimate prices guided steps at the guided cost and the others at a single forward', async () => {
      const key = (guidance: string) => CostModel.keyOf({ model: 'tiny/transformer', phase: 'denoise', shape: '3x8x8', guidance });
      const e = await Engine.create({
        families: builtinFamilies(),
        modelsDir,
        defaultModel: 'tiny',
        costSeed: { [key('sequential')]: 30, [key('single')]: 10 },
      });
      try {
        // 4 steps, [0, 0.5): steps 0 and 1 guided (2 × 30 ms), steps 2 and 3 not (2 × 10 ms).
        const events = await lastValueFrom(e.generate(req({ numInferenceSteps: 4, guidanceInterval: [0, 0.5] })).pipe(toArray()));
        expect(admittedOf(events).estimate).toEqual({ steps: 4, forwards: 6, ms: 80 });
      } finally {
        await e.close();
      }
    });

    it('a bad interval is one error event naming diffusion.guidanceInterval; the engine keeps serving', async () => {
      for (const guidanceInterval of [[0.6, 0.2], [0, 1.5], [-0.1, 0.5], [0, Number.NaN], [0.2], [0, 0.5, 1]]) {
        const events = await run(req({ guidanceInterval: guidanceInterval as [number, number] }));
        expect(events).toHaveLength(1);
        expect(events[0]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_INVALID_REQUEST' });
        expect(events[0].type === 'error' && events[0].param).toMatch(/^diffusion\.guidanceInterval/);
      }
      expect(finalOf(await run(req({ numInferenceSteps: 2 }))).artifacts.video.kind).toBe('video');
    });
  });

  it('runs the UniPC and DMD samplers a request names; DMD runs its distilled step count and rejects another', async () => {
    const unipc = await run(req({ sampler: 'unipc', numInferenceSteps: 5 }));
    expect(unipc.filter((e) => e.type === 'step')).toHaveLength(5);
    const euler = finalOf(await run(req({ numInferenceSteps: 5 }))).artifacts.video;
    const uni = finalOf(unipc).artifacts.video;
    if (euler.kind !== 'video' || uni.kind !== 'video') throw new Error('expected videos');
    expect(Buffer.from(uni.frames).equals(Buffer.from(euler.frames))).toBe(false);
    // DMD: the default timestep list [1000, 750, 500, 250] → 4 steps at σ = t/1000 shifted by the model's flow shift 2.
    const dmd = await run(req({ sampler: 'dmd', guidanceScale: 1 }));
    const steps = dmd.filter((e) => e.type === 'step');
    expect(steps.map((e) => (e.type === 'step' ? e.sigma : NaN))).toEqual(
      [1, (2 * 0.75) / (1 + 0.75), (2 * 0.5) / 1.5, (2 * 0.25) / 1.25].map((x) => expect.closeTo(x, 12)),
    );
    const again = await run(req({ sampler: 'dmd', guidanceScale: 1 }));
    const a = finalOf(dmd).artifacts.video;
    const b = finalOf(again).artifacts.video;
    if (a.kind !== 'video' || b.kind !== 'video') throw new Error('expected videos');
    expect(Buffer.from(a.frames).equals(Buffer.from(b.frames))).toBe(true); // re-noising is seeded
    const bad = await run(req({ sampler: 'dmd', numInferenceSteps: 20 }));
    expect(bad[bad.length - 1]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', param: 'diffusion.numInferenceSteps' });
  });

  describe('η (stochastic Euler steps)', () => {
    it('η > 0 re-noises between steps: seeded, reported, other bytes than η 0; η 0 is the default Euler run', async () => {
      const euler = await run(req({ numInferenceSteps: 3 }));
      expect(admittedOf(euler).params).toMatchObject({ sampler: 'euler', eta: 0 });
      expect(bytes(await run(req({ numInferenceSteps: 3, eta: 0 }))).equals(bytes(euler))).toBe(true);
      const noisy = await run(req({ numInferenceSteps: 3, eta: 1 }));
      expect(admittedOf(noisy).params).toMatchObject({ eta: 1 });
      expect(bytes(noisy).equals(bytes(euler))).toBe(false);
      expect(bytes(await run(req({ numInferenceSteps: 3, eta: 1 }))).equals(bytes(noisy))).toBe(true);
      expect(bytes(await run(req({ numInferenceSteps: 3, eta: 0.5 }))).equals(bytes(noisy))).toBe(false);
      // A one-step schedule [1, 0] has no step to re-noise into (its last step returns x̂₀): η changes nothing.
      const one = (eta: number) => run(req({ eta }, { nodeParams: { denoise: { sigmas: [1, 0] } } }));
      expect(bytes(await one(1)).equals(bytes(await one(0)))).toBe(true);
      // …while a two-step custom schedule is re-noised as the sampler's own schedule is.
      const two = (eta: number) => run(req({ eta }, { nodeParams: { denoise: { sigmas: [1, 0.5, 0] } } }));
      expect(bytes(await two(1)).equals(bytes(await two(0)))).toBe(false);
    });

    it("a model's default η applies to Euler when the request names none; the request's wins; other samplers run η 0", async () => {
      const dir = await makeModelsDir([{ spec: { ...tinySpec('tiny-eta'), defaults: { ...tinySpec().defaults, eta: 1 } }, seed: 1 }]);
      const e = await Engine.create({ families: builtinFamilies(), modelsDir: dir, defaultModel: 'tiny' });
      try {
        const go = (over: Partial<OmniRequestInput['diffusion']>, model = 'tiny-eta') =>
          lastValueFrom(e.generate(req({ numInferenceSteps: 3, ...over }, { model })).pipe(toArray()));
        const byModel = await go({});
        expect(admittedOf(byModel).params).toMatchObject({ eta: 1 });
        // The same seed-1 weights as 'tiny', so the bytes are 'tiny''s at η 1…
        expect(bytes(byModel).equals(bytes(await go({ eta: 1 }, 'tiny')))).toBe(true);
        // …and a request's η 0 gives 'tiny''s deterministic bytes.
        const byRequest = await go({ eta: 0 });
        expect(admittedOf(byRequest).params).toMatchObject({ eta: 0 });
        expect(bytes(byRequest).equals(bytes(await go({}, 'tiny')))).toBe(true);
        const unipc = await go({ sampler: 'unipc' });
        expect(admittedOf(unipc).params).toMatchObject({ sampler: 'unipc', eta: 0 });
        expect(bytes(unipc).equals(bytes(await go({ sampler: 'unipc' }, 'tiny')))).toBe(true);
      } finally {
        await e.close();
      }
    });

    it('a bad η, or an η for another sampler, is one error event naming diffusion.eta; the engine keeps serving', async () => {
      for (const eta of [-0.1, 1.01, Number.NaN, Number.POSITIVE_INFINITY, '0.5']) {
        const events = await run(req({ eta: eta as number }));
        expect(events).toHaveLength(1);
        expect(events[0]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_INVALID_REQUEST', param: 'diffusion.eta' });
      }
      for (const sampler of ['unipc', 'dmd'] as const) {
        // The schema accepts it; admission, which knows the sampler, refuses it before any step.
        const events = await run(req({ sampler, eta: 0.5, guidanceScale: 1 }));
        expect(events.map((e) => e.type)).toEqual(['queued', 'error']);
        expect(events[1]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', param: 'diffusion.eta' });
      }
      expect(finalOf(await run(req({ numInferenceSteps: 2, eta: 0.5 }))).artifacts.video.kind).toBe('video');
    });
  });

  it('bad input becomes one error event naming the field; nothing else runs', async () => {
    const before = native.stats().completed;
    const events = await run({ task: 'T2V', inputs: { prompt: 'x' }, diffusion: { width: -16 } } as OmniRequestInput);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_INVALID_REQUEST', param: 'diffusion.width' });
    const junk = await run('not a request' as unknown as OmniRequestInput);
    expect(junk[0]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_INVALID_REQUEST' });
    expect(native.stats().completed).toBe(before);
  });

  it('a hostile request with 100 000 unknown keys gets a bounded, printable error event', async () => {
    const hostile: Record<string, unknown> = { task: 'T2V', inputs: { prompt: 'x' } };
    for (let i = 0; i < 100_000; i++) hostile[`k\n${i}`] = 0;
    const [event] = await run(hostile as unknown as OmniRequestInput);
    expect(event).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_INVALID_REQUEST' });
    expect(JSON.stringify(event).length).toBeLessThan(10_000);
    expect(event.type === 'error' && event.message).not.toMatch(/\n/);
  });

  it('a closed engine answers with OMNIRX_ERR_UNAVAILABLE', async () => {
    const closed = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny' });
    await closed.close();
    const events = await lastValueFrom(closed.generate(req()).pipe(toArray()));
    expect(events).toEqual([expect.objectContaining({ type: 'error', code: 'OMNIRX_ERR_UNAVAILABLE' })]);
  });

  it('rejects values the model cannot honour instead of adjusting them', async () => {
    const events = await run(req({ width: 18 }));
    expect(events.map((e) => e.type)).toEqual(['queued', 'error']);
    expect(events[1]).toMatchObject({ code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', param: 'diffusion.width' });
    expect(events[1].type === 'error' && events[1].message).toMatch(/multiple of 4/);
  });

  it('rejects work over the ceiling at admission', async () => {
    const small = await Engine.create({
      families: builtinFamilies(),
      modelsDir,
      defaultModel: 'tiny',
      limits: { maxSide: 1024, maxPixels: 512 * 512, maxFrames: 256, maxSteps: 200, maxWork: 16 * 16 * 3 * 3, maxTokens: 4096, maxPromptChars: 100 },
    });
    const events = await lastValueFrom(small.generate(req({ numInferenceSteps: 4 })).pipe(toArray()));
    expect(events[events.length - 1]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_INVALID_REQUEST', param: 'diffusion' });
    await small.close();
  });

  it('an unknown model is a clear error and the engine keeps serving', async () => {
    const events = await run(req({}, { model: 'nope' }));
    expect(events[events.length - 1]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_UNKNOWN_MODEL', param: 'model' });
    expect((events[events.length - 1] as { message: string }).message).toMatch(/available: tiny/);
    const traversal = await run(req({}, { model: '../tiny' }));
    expect(traversal[traversal.length - 1]).toMatchObject({ code: 'OMNIRX_ERR_UNKNOWN_MODEL' });
    finalOf(await run(req()));
  });

  it('a truncated weights file fails that model only, with the file and tensor named', async () => {
    const events = await run(req({}, { model: 'tiny-broken' }));
    const err = events[events.length - 1];
    expect(err).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_SAFETENSORS' });
    expect(err.type === 'error' && err.message).toMatch(/transformer\.safetensors/);
    finalOf(await run(req()));
  });

  it('non-finite values fail only the request that produced them; a concurrent request completes', async () => {
    const [bad, good] = await Promise.all([run(req({}, { model: 'tiny-nan' })), run(req({ seed: 9 }))]);
    const err = bad[bad.length - 1];
    expect(err).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_NON_FINITE', node: 'denoise', completedSteps: 0 });
    expect(good[good.length - 1].type).toBe('final');
  });

  it('caches text embeddings: the same prompt again skips the text encoder and gives identical frames; another prompt misses', async () => {
    const model = await loadedWan(engine, 'tiny');
    const spy = jest.spyOn(model.textEncoder, 'encode');
    try {
      const prompt = { prompt: 'a green cube on a wooden table' };
      const first = finalOf(await run(req({ seed: 11 }, { inputs: prompt }))).artifacts.video;
      expect(spy.mock.calls.length).toBeGreaterThanOrEqual(1); // the prompt (and the negative prompt unless cached)
      const hitsBefore = inProcess(engine).caches.features!.stats().hits;
      spy.mockClear();
      const second = finalOf(await run(req({ seed: 11 }, { inputs: prompt }))).artifacts.video;
      expect(spy).not.toHaveBeenCalled();
      expect(inProcess(engine).caches.features!.stats().hits - hitsBefore).toBe(2); // prompt + negative prompt
      if (first.kind !== 'video' || second.kind !== 'video') throw new Error('expected videos');
      expect(Buffer.from(second.frames).equals(Buffer.from(first.frames))).toBe(true);
      spy.mockClear();
      const other = finalOf(await run(req({ seed: 11 }, { inputs: { prompt: 'a yellow bird over the sea' } }))).artifacts.video;
      expect(spy).toHaveBeenCalledTimes(1); // the new prompt only: the negative prompt is cached
      if (other.kind !== 'video') throw new Error('expected a video');
      expect(Buffer.from(other.frames).equals(Buffer.from(first.frames))).toBe(false);
    } finally {
      spy.mockRestore();
    }
  });

  it('unsubscribing cancels at the next step boundary and gives every native byte back', async () => {
    const shape = { numInferenceSteps: 40, seed: 3 };
    finalOf(await run(req(shape))); // warm: plans for this shape are compiled and cached by the model
    const baseline = await settledBytesInUse(native);
    const completedBefore = native.stats().completed;
    // Stop after the second step event.
    await firstValueFrom(
      engine.generate(req(shape)).pipe(
        filter((e) => e.type === 'step'),
        take(2),
        toArray(),
      ),
    );
    await new Promise((r) => setTimeout(r, 50));
    const stats = native.stats();
    expect(stats.running).toBe(0);
    expect(stats.queued).toBe(0);
    // text encoder (2 runs) + at most 3 steps × 2 forwards: the other 37 steps never ran
    expect(stats.completed - completedBefore).toBeLessThanOrEqual(2 + 3 * 2);
    expect(stats.bytesInUse).toBe(baseline);
  });

  it('native memory returns to its baseline after each of 50 generations', async () => {
    finalOf(await run(req({ seed: 1 })));
    const baseline = await settledBytesInUse(native);
    for (let i = 0; i < 50; i++) {
      finalOf(await run(req({ seed: 100 + i })));
      expect(native.stats().bytesInUse).toBe(baseline);
    }
  });

  it('the event loop stays free while a generation runs (JS callbacks observe native work in flight)', async () => {
    let seenRunning = 0;
    const timer = setInterval(() => {
      if (native.stats().running > 0) seenRunning += 1;
    }, 0);
    await run(req({ numInferenceSteps: 30, width: 64, height: 64, numFrames: 4 }));
    clearInterval(timer);
    // A JS timer callback ran while a native plan was executing: compute does not hold the event loop.
    expect(seenRunning).toBeGreaterThan(0);
  });
});

describe('bfloat16 matmuls (EngineOptions.matmulDtype)', () => {
  it('loads the DiT with bf16 matmuls (world rollouts too) and generates frames close to the float32 run', async () => {
    const bf = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', matmulDtype: 'bfloat16' });
    try {
      const model = await loadedWan(bf, 'tiny');
      expect(model.transformer().matmulDtype).toBe('bfloat16');
      const causal = model.causalTransformer({ chunkFrames: 1, sinkFrames: 1, localWindowFrames: 2, height: 4, width: 4, textLen: 8 });
      expect(causal.matmulDtype).toBe('bfloat16');
      causal.dispose();
      expect((await loadedWan(engine, 'tiny')).transformer().matmulDtype).toBe('float32');
      const r = req({ seed: 5, numInferenceSteps: 4 });
      const a = finalOf(await lastValueFrom(bf.generate(r).pipe(toArray()))).artifacts.video;
      const b = finalOf(await run(r)).artifacts.video;
      if (a.kind !== 'video' || b.kind !== 'video') throw new Error('no video');
      let diff = 0;
      let maxDiff = 0;
      for (let i = 0; i < a.frames.length; i++) {
        const d = Math.abs(a.frames[i] - b.frames[i]);
        diff += d;
        maxDiff = Math.max(maxDiff, d);
      }
      // 8-bit frames: bf16 rounding moves a pixel by a few levels at most, and some pixel does move.
      expect(diff / a.frames.length).toBeLessThan(2);
      expect(maxDiff).toBeGreaterThan(0);
      expect(maxDiff).toBeLessThan(32);
    } finally {
      await bf.close();
    }
  });
});

describe('native memory under changing sizes', () => {
  it('stays bounded: plans of sizes not used lately are freed (LRU)', async () => {
    const e = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny' });
    const sizes = [8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52];
    const go = (w: number) =>
      lastValueFrom(
        e
          .generate({ model: 'tiny', task: 'T2V', inputs: { prompt: 'a' }, diffusion: { width: w, height: 8, numFrames: 1, numInferenceSteps: 1, seed: 1 } })
          .pipe(toArray()),
      );
    for (const w of sizes.slice(0, 8)) finalOf(await go(w));
    const after8 = native.stats().bytesInUse;
    for (const w of sizes.slice(8)) finalOf(await go(w));
    // Four more sizes, each larger than any before: without eviction memory would grow by their plans.
    expect(native.stats().bytesInUse).toBeLessThan(after8 * 1.5);
    await e.close();
  });
});

describe('Engine.close', () => {
  it('ends queued and running requests with OMNIRX_ERR_UNAVAILABLE, waits for their native work, and frees every byte', async () => {
    const baseline = await settledBytesInUse(native);
    const e = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', maxRunning: 1 });
    const long = {
      model: 'tiny',
      task: 'T2V' as const,
      inputs: { prompt: 'a' },
      diffusion: { width: 40, height: 40, numFrames: 40, numInferenceSteps: 50, seed: 1 },
    };
    const ran: OmniEvent[] = [];
    let twoSteps!: () => void;
    const stepped = new Promise<void>((resolve) => (twoSteps = resolve));
    const running = new Promise<void>((resolve) =>
      e.generate(long).subscribe({
        next: (ev) => {
          ran.push(ev);
          if (ran.filter((x) => x.type === 'step').length === 2) twoSteps();
        },
        complete: resolve,
      }),
    );
    // Two more wait for the running slot.
    const queued = [1, 2].map((seed) => lastValueFrom(e.generate({ ...long, diffusion: { ...long.diffusion, seed } }).pipe(toArray())));
    await stepped;
    await e.close();
    // Nothing of the engine is left running or allocated once close resolves.
    expect(native.stats()).toMatchObject({ queued: 0, running: 0 });
    expect(e.stats()).toMatchObject({ queued: 0, running: 0, memoryBytes: 0 });
    expect(native.stats().bytesInUse).toBe(baseline);

    await running;
    const last = ran.at(-1)!;
    expect(last).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_UNAVAILABLE', message: 'the engine closed before the request finished', node: 'denoise' });
    if (last.type !== 'error') throw new Error('unreachable');
    expect(last.completedSteps).toBeGreaterThanOrEqual(2);
    expect(last.completedSteps).toBeLessThan(50);
    expect(ran.filter((ev) => ev.type === 'step').length).toBe(last.completedSteps);
    for (const waited of await Promise.all(queued)) {
      expect(waited.map((ev) => ev.type)).toEqual(['queued', 'error']);
      expect(waited[1]).toMatchObject({ code: 'OMNIRX_ERR_UNAVAILABLE', message: 'the engine closed before the request started' });
    }
    // A closed engine refuses new work; closing again is harmless.
    expect((await lastValueFrom(e.generate(long).pipe(toArray()))).map((ev) => ev.type === 'error' && ev.code)).toEqual(['OMNIRX_ERR_UNAVAILABLE']);
    await e.close();
    expect(native.stats().bytesInUse).toBe(baseline);
  });

  it('a second close() while the first is freeing resolves with it, not before', async () => {
    const baseline = await settledBytesInUse(native);
    const e = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny' });
    const ended = lastValueFrom(e.generate(req({ numInferenceSteps: 2 })).pipe(toArray())); // loads the model
    const first = e.close();
    const second = e.close();
    expect(second).toBe(first);
    await second;
    expect(native.stats()).toMatchObject({ queued: 0, running: 0, bytesInUse: baseline });
    expect((await ended).at(-1)).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_UNAVAILABLE' });
  });
});
