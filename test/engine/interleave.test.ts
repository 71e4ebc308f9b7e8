import * as path from 'node:path';
import { forkJoin, lastValueFrom, timeout, toArray, type Observable } from 'rxjs';
import { resolveWanParams } from '../../src/families/wan/admission';
import { OmniError } from '../../src/errors';
import { Engine } from '../../src/engine/engine';
import { runGraph } from '../../src/pipeline/graph-runner';
import { StepScheduler, type ScheduleDecision } from '../../src/executor/scheduler';
import { loadNative, type NativeBinding } from '../../src/native/binding';
import { WanT2VModel } from '../../src/families/wan/model';
import { CFGPolicy } from '../../src/pipeline/policies/cfg';
import { ExpertRouting } from '../../src/pipeline/policies/expert-routing';
import { SamplerPolicy } from '../../src/pipeline/policies/sampler-policy';
import { FlowShiftPolicy } from '../../src/pipeline/policies/flow-shift';
import type { ResolvedParams } from '../../src/pipeline/params';
import { RequestState } from '../../src/pipeline/request-state';
import { flowMatchSigmas } from '../../src/pipeline/samplers/flow-match-euler';
import { buildPipeline } from '../../src/pipeline/spec';
import type { WanT2VContext } from '../../src/families/wan/context';
import { wanT2VPipelineSpec } from '../../src/families/wan/pipeline';
import { actionAdaLNInjector } from '../../src/pipeline/policies/conditioning-injector';
import type { PipelinePolicies } from '../../src/pipeline/policies/policies';
import { inProcess, loadedWan } from '../helpers/engine';
import { WanT2VState } from '../../src/families/wan/state';
import { DEFAULT_LIMITS } from '../../src/request/limits';
import type { OmniEvent, OmniOutput } from '../../src/request/omni-event';
import { OmniRequestSchema, type OmniRequestInput } from '../../src/request/omni-request';
import { finalOf } from '../helpers/events';
import { makeModelsDir, tinySpec } from '../helpers/tiny-model';
import { builtinFamilies } from '../../src/families';

let modelsDir: string;
let native: NativeBinding;
const engines: Engine[] = [];

async function engineWith(options: Partial<Parameters<typeof Engine.create>[0]> = {}): Promise<Engine> {
  const e = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', native, ...options });
  engines.push(e);
  return e;
}

const req = (over: Partial<OmniRequestInput['diffusion']> = {}, extra: Partial<OmniRequestInput> = {}): OmniRequestInput => ({
  model: 'tiny',
  task: 'T2V',
  inputs: { prompt: 'a red ball in a blue room' },
  diffusion: { seed: 7, ...over },
  ...extra,
});

const collect = (e: Engine, r: OmniRequestInput): Promise<OmniEvent[]> => lastValueFrom(e.generate(r).pipe(toArray()));

function videoBytes(out: OmniOutput): Buffer {
  const v = out.artifacts.video;
  if (v?.kind !== 'video') throw new Error('expected a video artifact');
  return Buffer.from(v.frames);
}

function imageBytes(out: OmniOutput): Buffer {
  const v = out.artifacts.image;
  if (v?.kind !== 'image') throw new Error('expected an image artifact');
  return Buffer.from(v.pixels);
}

/** Number of maximal runs of equal consecutive values (A A B A → 3). */
function runsOf(xs: readonly string[]): number {
  return xs.reduce((n, x, i) => (i === 0 || x !== xs[i - 1] ? n + 1 : n), 0);
}

beforeAll(async () => {
  native = loadNative();
  // 'tiny2' has a second DiT (same config, different weights: drawn after the first from the same seeded stream).
  const tiny2 = { ...tinySpec('tiny2'), transformer_2: tinySpec().transformer };
  modelsDir = await makeModelsDir([{ spec: tiny2, seed: 5 }]);
});

afterAll(async () => {
  for (const e of engines) await e.close();
});

describe('interleaving at the graph-runner level (one StepScheduler, two pipelines)', () => {
  const policiesA: PipelinePolicies = {
    cfg: CFGPolicy.classic(),
    expert: ExpertRouting.single(),
    flowShift: FlowShiftPolicy.fixed(),
    sampler: SamplerPolicy.of('euler'),
    conditioning: actionAdaLNInjector,
  };
  const policiesB: PipelinePolicies = {
    cfg: CFGPolicy.batched([0, 0.5]),
    sampler: SamplerPolicy.of('unipc'),
    expert: ExpertRouting.single(),
    conditioning: actionAdaLNInjector,
    flowShift: FlowShiftPolicy.byResolution([
      { maxPixels: 16 * 16, shift: 3 },
      { maxPixels: 1024 * 1024, shift: 5 },
    ]),
  };
  const pipeA = buildPipeline(wanT2VPipelineSpec(policiesA), { tasks: ['T2V'] });
  const pipeB = buildPipeline(wanT2VPipelineSpec(policiesB), { tasks: ['T2V'] });
  const inputA = req({ seed: 11, numInferenceSteps: 6, guidanceScale: 4 }, { requestId: 'A' });
  const inputB = req({ seed: 11, numInferenceSteps: 6, guidanceScale: 7.5 }, { requestId: 'B' });
  let model: WanT2VModel;

  beforeAll(async () => {
    model = await WanT2VModel.fromDirectory(native, path.join(modelsDir, 'tiny'));
  });

  afterAll(() => model.dispose());

  /** Builds the context and state the way Engine.run does and returns the cold event stream. */
  function start(pipe: typeof pipeA, policies: PipelinePolicies, input: OmniRequestInput, scheduler: StepScheduler) {
    const r = OmniRequestSchema.parse(input);
    const requestId = r.requestId!;
    const params = resolveWanParams(r, model.spec, { limits: DEFAULT_LIMITS, policies });
    const nodeParams = pipe.parseNodeParams(r.nodeParams);
    const abort = new AbortController();
    const ctx: WanT2VContext = { requestId, model, params, nodeParams, native, signal: abort.signal };
    const state = new WanT2VState();
    const events$: Observable<OmniEvent[]> = runGraph(
      pipe.activeNodes(params),
      Object.keys(pipe.spec.requestInputs),
      ctx,
      state,
      { scheduler, requestId, priority: params.priority },
      () => undefined,
    ).pipe(toArray());
    return { params, state, events$ };
  }

  it('two requests with different policies and scales interleave on one scheduler and match their solo runs bit for bit', async () => {
    // Solo runs first, each on its own scheduler (this also warms the model's plans for the shape).
    const frames = (st: WanT2VState) => Buffer.from((st.artifacts.video as { frames: Uint8Array }).frames);
    const soloA = start(pipeA, policiesA, inputA, new StepScheduler());
    await lastValueFrom(soloA.events$);
    const soloB = start(pipeB, policiesB, inputB, new StepScheduler());
    await lastValueFrom(soloB.events$);
    const expectedA = frames(soloA.state);
    const expectedB = frames(soloB.state);
    soloA.state.release();
    soloB.state.release();
    expect(expectedA.equals(expectedB)).toBe(false);

    const shared = new StepScheduler({ batchWindowMs: 0 });
    const decisions: ScheduleDecision[] = [];
    const sub = shared.decisions$.subscribe((d) => decisions.push(d));
    const a = start(pipeA, policiesA, inputA, shared);
    const b = start(pipeB, policiesB, inputB, shared);
    expect(a.params.flowShift).toBe(2); // the model default
    expect(b.params.flowShift).toBe(3); // 16×16 = 256 px: the first row
    const [eventsA, eventsB] = await lastValueFrom(forkJoin([a.events$, b.events$]));
    sub.unsubscribe();

    // Each step is its own unit (video steps never batch), and the two requests' steps interleaved: B ran before
    // A's last step and A before B's last (A, B, A, … rather than all of A, then all of B).
    expect(decisions.every((d) => d.requestIds.length === 1 && d.batchKey === undefined)).toBe(true);
    const order = decisions.map((d) => d.requestIds[0]);
    expect(order.filter((id) => id === 'A')).toHaveLength(6);
    expect(order.filter((id) => id === 'B')).toHaveLength(6);
    expect(order.indexOf('B')).toBeLessThan(order.lastIndexOf('A'));
    expect(order.indexOf('A')).toBeLessThan(order.lastIndexOf('B'));
    expect(runsOf(order)).toBeGreaterThanOrEqual(3);
    // both at the same priority: each grant is the earliest ready step or the one of the request with less attained
    // service; which of the two labels a grant gets depends on when each step became ready (wall time), so the
    // reasons themselves are checked in virtual time (test/engine/scheduler/step-scheduler.test.ts)
    expect(decisions.every((d) => d.reason === 'fifo' || d.reason === 'least-attained-service')).toBe(true);

    // B sampled with its own schedule (shift 3) while A used shift 2.
    const sigmasOf = (evs: OmniEvent[]) => evs.flatMap((e) => (e.type === 'step' ? [e.sigma] : []));
    expect(sigmasOf(eventsA)).toEqual(Array.from(flowMatchSigmas(6, 2)).slice(0, 6));
    expect(sigmasOf(eventsB)).toEqual(Array.from(flowMatchSigmas(6, 3)).slice(0, 6));

    expect(frames(a.state).equals(expectedA)).toBe(true);
    expect(frames(b.state).equals(expectedB)).toBe(true);
    a.state.release();
    b.state.release();
  });

  it('the B policies really change the result: B with classic full-interval CFG differs', async () => {
    const classicB: PipelinePolicies = { ...policiesB, cfg: CFGPolicy.classic() };
    const pipe = buildPipeline(wanT2VPipelineSpec(classicB), { tasks: ['T2V'] });
    const gated = start(pipeB, policiesB, inputB, new StepScheduler());
    const full = start(pipe, classicB, inputB, new StepScheduler());
    await lastValueFrom(forkJoin([gated.events$, full.events$]));
    const f = (s: WanT2VState) => Buffer.from((s.artifacts.video as { frames: Uint8Array }).frames);
    expect(f(gated.state).equals(f(full.state))).toBe(false);
    gated.state.release();
    full.state.release();
  });
});

describe('graph runner: missing inputs', () => {
  it('a node whose producer is switched off by `when` fails the request at once instead of waiting forever', async () => {
    type Ctx = { requestId: string };
    const ran: string[] = [];
    const stage = (name: string) => ({ name, forward: async () => void ran.push(name) });
    const built = buildPipeline<Ctx, RequestState>(
      {
        family: 'fake',
        components: {},
        requestInputs: { prompt: 'text' },
        nodes: [
          {
            name: 'preview',
            run: { kind: 'stage', stage: stage('preview') },
            inputs: { prompt: 'text' },
            outputs: { thumb: 'image' },
            components: [],
            tasks: ['T2V'],
            when: (p) => p.returnLatents,
          },
          {
            name: 'encode',
            run: { kind: 'stage', stage: stage('encode') },
            inputs: { prompt: 'text' },
            outputs: { embeds: 'embeds' },
            components: [],
            tasks: ['T2V'],
          },
          {
            name: 'pack',
            run: { kind: 'stage', stage: stage('pack') },
            inputs: { thumb: 'image', embeds: 'embeds' },
            outputs: { file: 'file' },
            components: [],
            tasks: ['T2V'],
          },
        ],
      },
      { tasks: ['T2V'] },
    );
    const nodes = built.activeNodes({ task: 'T2V', returnLatents: false } as ResolvedParams);
    expect(nodes.map((n) => n.name)).toEqual(['encode', 'pack']);
    let failedAt = '';
    const run$ = runGraph(
      nodes,
      ['prompt'],
      { requestId: 'r' },
      new RequestState(),
      { scheduler: new StepScheduler(), requestId: 'r', priority: 0 },
      (n) => (failedAt = n),
    );
    const err = await lastValueFrom(run$.pipe(toArray(), timeout(2000))).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OmniError);
    expect(err).toMatchObject({ code: 'OMNIRX_ERR_INVALID_PIPELINE' });
    expect((err as Error).message).toMatch(/node 'pack'.*edge 'thumb'/);
    expect(failedAt).toBe('pack');
    expect(ran).toEqual([]);
    // With the producer on, the same graph runs to the end.
    const all = built.activeNodes({ task: 'T2V', returnLatents: true } as ResolvedParams);
    const events = await lastValueFrom(
      runGraph(all, ['prompt'], { requestId: 'r' }, new RequestState(), { scheduler: new StepScheduler(), requestId: 'r', priority: 0 }, () => undefined).pipe(
        toArray(),
      ),
    );
    expect(events.filter((e) => e.type === 'node_end').map((e) => (e.type === 'node_end' ? e.node : ''))).toContain('pack');
    expect(ran.sort()).toEqual(['encode', 'pack', 'preview']);
  });
});

describe('CFG variants through the engine', () => {
  it('batched CFG (one forward of 2 rows) equals classic CFG (two forwards) bit for bit', async () => {
    const classic = await engineWith({ policies: { cfg: CFGPolicy.classic() } });
    const batched = await engineWith({ policies: { cfg: CFGPolicy.batched() } });
    const r = req({ seed: 21, numInferenceSteps: 4, guidanceScale: 5 });
    const evC = await collect(classic, r);
    const evB = await collect(batched, r);
    expect(videoBytes(finalOf(evC)).equals(videoBytes(finalOf(evB)))).toBe(true);
    // The admitted estimates still count two forwards per guided step for both.
    const est = (evs: OmniEvent[]) => evs.find((e) => e.type === 'admitted');
    expect(est(evB)).toMatchObject({ estimate: { steps: 4, forwards: 8 } });
    // And guidance does something: scale 1 (one forward) differs.
    const unguided = await collect(batched, req({ seed: 21, numInferenceSteps: 4, guidanceScale: 1 }));
    expect(videoBytes(finalOf(unguided)).equals(videoBytes(finalOf(evB)))).toBe(false);
  });
});

describe('T2I step batching across requests', () => {
  it('four concurrent T2I requests at one resolution batch their steps and each equals its solo run', async () => {
    const batching = await engineWith({ batchWindowMs: 50 });
    const solo = await engineWith();
    const seeds = [1, 2, 3, 4];
    const input = (seed: number): OmniRequestInput => ({
      model: 'tiny',
      task: 'T2I',
      inputs: { prompt: 'a blue ball' },
      diffusion: { seed, width: 16, height: 16, numInferenceSteps: 3 },
      requestId: `img-${seed}`,
    });
    const decisions: ScheduleDecision[] = [];
    const sub = inProcess(batching).steps.decisions$.subscribe((d) => decisions.push(d));
    const together = await Promise.all(seeds.map((s) => collect(batching, input(s))));
    sub.unsubscribe();

    const batches = decisions.filter((d) => d.requestIds.length >= 2);
    expect(batches.length).toBeGreaterThan(0);
    for (const d of batches) {
      expect(d.batchKey).toBeDefined();
      expect(d.batchKey).toContain('tiny|transformer|1x8x8');
      expect(new Set(d.requestIds).size).toBe(d.requestIds.length);
    }
    // Every step of every request was granted exactly once.
    expect(decisions.flatMap((d) => d.requestIds).sort()).toEqual(seeds.flatMap((s) => [`img-${s}`, `img-${s}`, `img-${s}`]).sort());

    const outs = together.map(finalOf);
    for (const [i, seed] of seeds.entries()) {
      const alone = finalOf(await collect(solo, input(seed)));
      expect(imageBytes(outs[i]).equals(imageBytes(alone))).toBe(true);
    }
    // Different seeds give different images (the batch did not mix rows up into copies).
    expect(imageBytes(outs[0]).equals(imageBytes(outs[1]))).toBe(false);
  });

  it('requests at η > 0 batch too: each re-noises from its own seeded stream and equals its solo run', async () => {
    const batching = await engineWith({ batchWindowMs: 50 });
    const solo = await engineWith();
    const input = (seed: number, eta: number): OmniRequestInput => ({
      model: 'tiny',
      task: 'T2I',
      inputs: { prompt: 'a blue ball' },
      diffusion: { seed, eta, width: 16, height: 16, numInferenceSteps: 3 },
      requestId: `eta-${seed}-${eta}`,
    });
    const runs = [input(1, 1), input(2, 0.5), input(3, 0)];
    const decisions: ScheduleDecision[] = [];
    const sub = inProcess(batching).steps.decisions$.subscribe((d) => decisions.push(d));
    const together = await Promise.all(runs.map((r) => collect(batching, r)));
    sub.unsubscribe();
    expect(decisions.some((d) => d.requestIds.length >= 2)).toBe(true);
    for (const [i, r] of runs.entries()) expect(imageBytes(finalOf(together[i])).equals(imageBytes(finalOf(await collect(solo, r))))).toBe(true);
  });
});

describe('expert routing', () => {
  const boundary = () => ExpertRouting.boundary('transformer', 'transformer_2', 0.5);

  it('boundary routing switches to transformer_2 for low-noise steps and changes the output', async () => {
    const routed = await engineWith({ defaultModel: 'tiny2', policies: { expert: boundary() } });
    const single = await engineWith({ defaultModel: 'tiny2' });
    // flow shift 1, 4 steps: t = 1000, 750, 500 (transformer) then 250 (transformer_2).
    const r = req({ seed: 3, numInferenceSteps: 4, flowShift: 1 }, { model: 'tiny2' });
    const outRouted = finalOf(await collect(routed, r));
    const outSingle = finalOf(await collect(single, r));
    expect(videoBytes(outRouted).equals(videoBytes(outSingle))).toBe(false);
    const key = (expert: string) => ({ model: `tiny2/${expert}`, phase: 'denoise', shape: '3x8x8', guidance: 'sequential' });
    expect(inProcess(routed).steps.costModel.samples(key('transformer'))).toBe(3);
    expect(inProcess(routed).steps.costModel.samples(key('transformer_2'))).toBe(1);
    expect(inProcess(single).steps.costModel.samples(key('transformer_2'))).toBe(0);
    expect((await loadedWan(routed, 'tiny2')).loadedComponents).toContain('transformer_2');
  });

  it('when every step stays above the boundary, boundary routing equals single routing', async () => {
    const routed = await engineWith({ defaultModel: 'tiny2', policies: { expert: boundary() } });
    const single = await engineWith({ defaultModel: 'tiny2' });
    // flow shift 2, 3 steps: t = 1000, 800, 500 — all ≥ 500.
    const r = req({ seed: 3, numInferenceSteps: 3, flowShift: 2 }, { model: 'tiny2' });
    expect(videoBytes(finalOf(await collect(routed, r))).equals(videoBytes(finalOf(await collect(single, r))))).toBe(true);
  });

  it('the default single routing never loads transformer_2', async () => {
    const single = await engineWith({ defaultModel: 'tiny2' });
    finalOf(await collect(single, req({}, { model: 'tiny2' })));
    const loaded = (await loadedWan(single, 'tiny2')).loadedComponents;
    expect(loaded).not.toContain('transformer_2');
    // vae_encoder: the default deployment also serves WORLD sessions (image-to-world).
    expect([...loaded].sort()).toEqual(['text_encoder', 'tokenizer', 'transformer', 'vae', 'vae_encoder']);
  });

  it('boundary routing on a model without transformer_2 fails that request with a model-load error', async () => {
    const routed = await engineWith({ policies: { expert: boundary() } });
    const events = await collect(routed, req());
    expect(events[events.length - 1]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_MODEL_LOAD' });
    expect((events[events.length - 1] as { message: string }).message).toMatch(/transformer_2/);
  });
});

describe('nodeParams', () => {
  it('denoise.sigmas replaces the schedule: 3 step events with exactly those sigmas', async () => {
    const e = await engineWith();
    const events = await collect(e, req({ seed: 4, numInferenceSteps: 3 }, { nodeParams: { denoise: { sigmas: [1, 0.6, 0.2, 0] } } }));
    finalOf(events);
    const steps = events.flatMap((ev) => (ev.type === 'step' ? [ev] : []));
    expect(steps.map((s) => [s.index, s.total, s.sigma])).toEqual([
      [0, 3, 1],
      [1, 3, 0.6],
      [2, 3, 0.2],
    ]);
    expect(steps[1].timestep).toBeCloseTo(600, 9);
    // The default schedule for the same request (shift 2) is different, and so is the output.
    const plain = await collect(e, req({ seed: 4, numInferenceSteps: 3 }));
    expect(plain.flatMap((ev) => (ev.type === 'step' ? [ev.sigma] : []))[1]).toBeCloseTo(0.8, 12);
    expect(videoBytes(finalOf(plain)).equals(videoBytes(finalOf(events)))).toBe(false);
  });

  it('a custom schedule sets the number of steps', async () => {
    const e = await engineWith();
    const events = await collect(e, req({ numInferenceSteps: 5 }, { nodeParams: { denoise: { sigmas: [0.9, 0] } } }));
    finalOf(events);
    expect(events.flatMap((ev) => (ev.type === 'step' ? [[ev.index, ev.total, ev.sigma]] : []))).toEqual([[0, 1, 0.9]]);
  });

  it('a bad schedule is an error event naming nodeParams.denoise.sigmas; nothing runs', async () => {
    const e = await engineWith();
    const events = await collect(e, req({}, { nodeParams: { denoise: { sigmas: [0.2, 0.6, 0] } } }));
    expect(events.map((ev) => ev.type)).toEqual(['queued', 'error']);
    expect(events[1]).toMatchObject({ code: 'OMNIRX_ERR_INVALID_REQUEST', param: 'nodeParams.denoise.sigmas' });
    const over = await collect(e, req({}, { nodeParams: { denoise: { sigmas: [1, 0.5, 0.1] } } }));
    expect(over[over.length - 1]).toMatchObject({ type: 'error', param: 'nodeParams.denoise.sigmas' });
  });

  it('an unknown node is an error event naming nodeParams.<name>', async () => {
    const e = await engineWith();
    const events = await collect(e, req({}, { nodeParams: { upscale: { factor: 2 } } }));
    expect(events.map((ev) => ev.type)).toEqual(['queued', 'error']);
    expect(events[1]).toMatchObject({ code: 'OMNIRX_ERR_INVALID_REQUEST', param: 'nodeParams.upscale' });
    const noParams = await collect(e, req({}, { nodeParams: { decode_video: {} } }));
    expect(noParams[noParams.length - 1]).toMatchObject({ type: 'error', param: 'nodeParams.decode_video' });
    expect(e.stats()).toEqual({ queued: 0, running: 0, memoryBytes: 0, sessions: 0 });
  });
});
