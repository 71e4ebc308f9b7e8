import { defaultPolicies } from '../../src/pipeline/policies/policies';
import { z } from 'zod';
import { OmniError } from '../../src/errors';
import type { ResolvedParams } from '../../src/pipeline/params';
import { CFGPolicy } from '../../src/pipeline/policies/cfg';
import { ExpertRouting } from '../../src/pipeline/policies/expert-routing';
import { FlowShiftPolicy } from '../../src/pipeline/policies/flow-shift';
import { buildPipeline, type ComponentSpec, type NodeSpec, type PipelineSpec } from '../../src/pipeline/spec';
import type { LoopStage, Stage } from '../../src/pipeline/stage';
import { DenoiseNodeParamsSchema, wanT2VPipelineSpec } from '../../src/families/wan/pipeline';
import type { Task } from '../../src/request/omni-request';

type N = NodeSpec<unknown, unknown>;
type Spec = PipelineSpec<unknown, unknown>;

/** A one-shot stage that does nothing (build never runs stages). */
const stage = (name: string): Stage<unknown, unknown> => ({ name, forward: async () => undefined });

/** A loop stage that does nothing. */
const loopStage = (name: string): LoopStage<unknown, unknown, unknown> => ({
  name,
  cost: () => ({ model: 'm', phase: 'p', shape: 's', guidance: 'g' }),
  remaining: () => 0,
  init: () => ({}),
  step: async () => ({ done: true }),
  finalize: () => undefined,
  release: () => undefined,
});

const BOTH: readonly Task[] = ['T2V', 'T2I'];

const node = (name: string, inputs: Record<string, string>, outputs: Record<string, string>, extra: Partial<N> = {}): N => ({
  name,
  run: { kind: 'stage', stage: stage(name) },
  inputs,
  outputs,
  components: [],
  tasks: BOTH,
  ...extra,
});

const spec = (nodes: N[], extra: Partial<Spec> = {}): Spec => ({
  family: 'fake',
  components: {},
  requestInputs: { prompt: 'text' },
  nodes,
  ...extra,
});

const params = (over: Partial<ResolvedParams> = {}): ResolvedParams => ({
  task: 'T2V',
  model: 'tiny',
  prompt: 'a ball',
  negativePrompt: '',
  width: 16,
  height: 16,
  numFrames: 3,
  fps: 6,
  numInferenceSteps: 3,
  guidanceScale: 4,
  guidanceInterval: [0, 1],
  flowShift: 2,
  sampler: 'euler',
  eta: 0,
  seed: 1,
  modalities: ['video'],
  returnLatents: false,
  priority: 0,
  ...over,
});

/** Runs `f`, expects an OmniError with `code`, and returns it for further checks. */
function catchOmni(f: () => unknown, code: string): OmniError {
  let caught: unknown;
  try {
    f();
  } catch (e) {
    caught = e;
  }
  expect(caught).toBeInstanceOf(OmniError);
  expect((caught as OmniError).code).toBe(code);
  return caught as OmniError;
}

const rejects = (s: Spec, tasks: readonly Task[] = BOTH): OmniError => catchOmni(() => buildPipeline(s, { tasks }), 'OMNIRX_ERR_INVALID_PIPELINE');

const names = (nodes: ReadonlyArray<{ name: string }>): string[] => nodes.map((n) => n.name);

/** Every node comes after the producers of every edge it consumes. */
function expectTopological(order: readonly N[]): void {
  const seen = new Set<string>();
  for (const n of order) {
    for (const e of Object.keys(n.inputs)) {
      for (const m of order) if (m !== n && e in m.outputs) expect(seen.has(m.name)).toBe(true);
    }
    seen.add(n.name);
  }
}

describe('buildPipeline: valid graphs', () => {
  it('builds a linear graph in topological order even when the nodes are declared backwards', () => {
    const s = spec([
      node('decode', { latents: 'latents' }, { video: 'video' }),
      node('denoise', { embeds: 'embeds' }, { latents: 'latents' }, { run: { kind: 'loop', stage: loopStage('denoise') } }),
      node('encode', { prompt: 'text' }, { embeds: 'embeds' }),
    ]);
    const built = buildPipeline(s, { tasks: ['T2V'] });
    expect(names(built.order)).toEqual(['encode', 'denoise', 'decode']);
    expectTopological(built.order);
    expect(built.tasks).toEqual(['T2V']);
    expect(names(built.activeNodes(params()))).toEqual(['encode', 'denoise', 'decode']);
  });

  it('builds fan-out / fan-in (diamond) graphs; every node follows its producers', () => {
    const s = spec([
      node('mux', { video: 'video', audio: 'audio' }, { file: 'mp4' }),
      node('audio_decode', { latents: 'latents' }, { audio: 'audio' }),
      node('video_decode', { latents: 'latents' }, { video: 'video' }),
      node('denoise', { prompt: 'text' }, { latents: 'latents' }),
    ]);
    const built = buildPipeline(s, { tasks: BOTH });
    expect(built.order).toHaveLength(4);
    expectTopological(built.order);
    expect(built.order[0].name).toBe('denoise');
    expect(built.order[3].name).toBe('mux');
    expect(new Set(names(built.order.slice(1, 3)))).toEqual(new Set(['audio_decode', 'video_decode']));
  });

  it('allows alternative producers of one edge when their tasks are disjoint, and orders consumers after both', () => {
    const s = spec([
      node('export', { pixels: 'rgb' }, { file: 'file' }),
      node('decode_video', { prompt: 'text' }, { pixels: 'rgb' }, { tasks: ['T2V'] }),
      node('decode_image', { prompt: 'text' }, { pixels: 'rgb' }, { tasks: ['T2I'] }),
    ]);
    const built = buildPipeline(s, { tasks: BOTH });
    expect(built.order[2].name).toBe('export');
    expect(names(built.activeNodes(params({ task: 'T2V' })))).toEqual(['decode_video', 'export']);
    expect(names(built.activeNodes(params({ task: 'T2I' })))).toEqual(['decode_image', 'export']);
  });

  it('activeNodes applies the task and the `when` predicate, in topological order', () => {
    const s = spec([
      node('encode', { prompt: 'text' }, { embeds: 'embeds' }),
      node('denoise', { embeds: 'embeds' }, { latents: 'latents' }),
      node('decode_video', { latents: 'latents' }, { video: 'video' }, { tasks: ['T2V'] }),
      node('decode_image', { latents: 'latents' }, { image: 'image' }, { tasks: ['T2I'] }),
      node('export', { latents: 'latents' }, { latents_artifact: 'latents_artifact' }, { when: (p) => p.returnLatents }),
    ]);
    const built = buildPipeline(s, { tasks: BOTH });
    expect(names(built.activeNodes(params({ task: 'T2V' })))).toEqual(['encode', 'denoise', 'decode_video']);
    expect(names(built.activeNodes(params({ task: 'T2I' })))).toEqual(['encode', 'denoise', 'decode_image']);
    const withLatents = names(built.activeNodes(params({ task: 'T2I', returnLatents: true })));
    expect(withLatents).toEqual(expect.arrayContaining(['encode', 'denoise', 'decode_image', 'export']));
    expect(withLatents).toHaveLength(4);
    expect(withLatents.indexOf('export')).toBeGreaterThan(withLatents.indexOf('denoise'));
  });

  it('activeNodes rejects a task the deployment does not serve', () => {
    const built = buildPipeline(spec([node('encode', { prompt: 'text' }, { embeds: 'embeds' })]), { tasks: ['T2V'] });
    const err = catchOmni(() => built.activeNodes(params({ task: 'T2I' })), 'OMNIRX_ERR_UNSUPPORTED_VALUE');
    expect(err.param).toBe('task');
    expect(err.message).toMatch(/T2I/);
  });

  it('loads only the components of nodes whose tasks are deployed', () => {
    const components: Record<string, ComponentSpec> = {
      text_encoder: { tasks: BOTH },
      transformer: { tasks: BOTH },
      vae: { tasks: BOTH },
      // Needed only by an audio node that serves T2I (standing in for a T2VS-like task); T2V-only never loads it.
      sound_vae: { tasks: ['T2I'] },
    };
    const make = () =>
      spec(
        [
          node('encode', { prompt: 'text' }, { embeds: 'embeds' }, { components: ['text_encoder'] }),
          node('denoise', { embeds: 'embeds' }, { latents: 'latents' }, { components: ['transformer'] }),
          node('decode_video', { latents: 'latents' }, { video: 'video' }, { components: ['vae'], tasks: ['T2V'] }),
          node('decode_audio', { latents: 'latents' }, { audio: 'audio' }, { components: ['sound_vae'], tasks: ['T2I'] }),
        ],
        { components },
      );
    const t2v = buildPipeline(make(), { tasks: ['T2V'] });
    expect([...t2v.components].sort()).toEqual(['text_encoder', 'transformer', 'vae']);
    expect(t2v.components.has('sound_vae')).toBe(false);
    const both = buildPipeline(make(), { tasks: BOTH });
    expect([...both.components].sort()).toEqual(['sound_vae', 'text_encoder', 'transformer', 'vae']);
  });

  it('freezes the spec: assigning to its nodes, edges or components throws (strict mode)', () => {
    const built = buildPipeline(spec([node('encode', { prompt: 'text' }, { embeds: 'embeds' })], { components: { te: { tasks: ['T2V'] } } }), {
      tasks: ['T2V'],
    });
    const s = built.spec as unknown as { nodes: unknown[]; components: Record<string, unknown>; requestInputs: Record<string, string> };
    const n = built.spec.nodes[0] as unknown as { name: string; inputs: Record<string, string>; outputs: Record<string, string>; tasks: Task[] };
    expect(Object.isFrozen(built.spec)).toBe(true);
    expect(() => {
      (s.nodes as unknown[]).push(node('x', {}, {}));
    }).toThrow(TypeError);
    expect(() => {
      s.nodes[0] = node('x', {}, {});
    }).toThrow(TypeError);
    expect(() => {
      n.name = 'renamed';
    }).toThrow(TypeError);
    expect(() => {
      n.inputs.extra = 'text';
    }).toThrow(TypeError);
    expect(() => {
      n.inputs.prompt = 'tokens';
    }).toThrow(TypeError);
    expect(() => {
      n.outputs.more = 'x';
    }).toThrow(TypeError);
    expect(() => {
      n.tasks.push('T2I');
    }).toThrow(TypeError);
    expect(() => {
      s.components.vae = { tasks: [] };
    }).toThrow(TypeError);
    expect(() => {
      s.requestInputs.image = 'image';
    }).toThrow(TypeError);
    expect(() => {
      (built.order as N[]).pop();
    }).toThrow(TypeError);
    expect(built.spec.nodes[0].inputs).toEqual({ prompt: 'text' });
  });
});

describe('buildPipeline: rejections name the node or edge', () => {
  it('an edge whose producer and consumer disagree on its type', () => {
    const err = rejects(spec([node('encode', { prompt: 'text' }, { embeds: 'embeds' }), node('denoise', { embeds: 'tokens' }, { latents: 'latents' })]));
    expect(err.message).toMatch(/'embeds'/);
    expect(err.message).toMatch(/'denoise'/);
    expect(err.message).toMatch(/'tokens'/);
    expect(err.message).toMatch(/fake/);
  });

  it('a request input consumed with the wrong type', () => {
    const err = rejects(spec([node('encode', { prompt: 'tokens' }, { embeds: 'embeds' })]));
    expect(err.message).toMatch(/'prompt'/);
    expect(err.message).toMatch(/'encode'/);
  });

  it('an edge consumed that nobody produces', () => {
    const err = rejects(spec([node('encode', { prompt: 'text' }, { embeds: 'embeds' }), node('decode', { latents: 'latents' }, { video: 'video' })]));
    expect(err.message).toMatch(/node 'decode'/);
    expect(err.message).toMatch(/edge 'latents'/);
  });

  it('an edge consumed for a deployed task that no producer serves (the request would wait forever)', () => {
    const s = () =>
      spec([
        node('decode_image', { prompt: 'text' }, { pixels: 'rgb' }, { tasks: ['T2I'] }),
        node('export', { pixels: 'rgb' }, { file: 'file' }, { tasks: ['T2V', 'T2I'] }),
      ]);
    const err = rejects(s(), BOTH);
    expect(err.message).toMatch(/node 'export'/);
    expect(err.message).toMatch(/edge 'pixels'/);
    expect(err.message).toMatch(/T2V/);
    // A T2I-only deployment never runs `export` without its producer.
    expect(names(buildPipeline(s(), { tasks: ['T2I'] }).order)).toEqual(['decode_image', 'export']);
  });

  it('an edge produced twice by nodes with overlapping tasks', () => {
    const err = rejects(
      spec([
        node('decode_a', { prompt: 'text' }, { video: 'video' }, { tasks: ['T2V'] }),
        node('decode_b', { prompt: 'text' }, { video: 'video' }, { tasks: ['T2V', 'T2I'] }),
      ]),
    );
    expect(err.message).toMatch(/edge 'video'/);
    expect(err.message).toMatch(/'decode_a'/);
    expect(err.message).toMatch(/'decode_b'/);
  });

  it('an edge produced twice with overlapping tasks even when a disjoint producer is declared between them', () => {
    const err = rejects(
      spec([
        node('a', { prompt: 'text' }, { pixels: 'rgb' }, { tasks: ['T2V'] }),
        node('b', { prompt: 'text' }, { pixels: 'rgb' }, { tasks: ['T2I'] }),
        node('c', { prompt: 'text' }, { pixels: 'rgb' }, { tasks: ['T2V'] }),
      ]),
    );
    expect(err.message).toMatch(/edge 'pixels'/);
    expect(err.message).toMatch(/'a'/);
    expect(err.message).toMatch(/'c'/);
  });

  it('an edge produced by a node and also provided by the request', () => {
    const err = rejects(spec([node('echo', { prompt: 'text' }, { prompt: 'text' })]));
    expect(err.message).toMatch(/edge 'prompt'/);
    expect(err.message).toMatch(/\(request\)/);
  });

  it('alternative producers of one edge with different types', () => {
    const err = rejects(
      spec([node('v', { prompt: 'text' }, { pixels: 'rgb' }, { tasks: ['T2V'] }), node('i', { prompt: 'text' }, { pixels: 'yuv' }, { tasks: ['T2I'] })]),
    );
    expect(err.message).toMatch(/edge 'pixels'/);
    expect(err.message).toMatch(/'rgb'/);
    expect(err.message).toMatch(/'yuv'/);
  });

  it('a cycle, listing the nodes on it', () => {
    const err = rejects(
      spec([
        node('encode', { prompt: 'text' }, { embeds: 'embeds' }),
        node('a', { embeds: 'embeds', c_out: 'x' }, { a_out: 'x' }),
        node('b', { a_out: 'x' }, { b_out: 'x' }),
        node('c', { b_out: 'x' }, { c_out: 'x' }),
      ]),
    );
    expect(err.message).toMatch(/cycle/);
    for (const n of ['a', 'b', 'c']) expect(err.message).toContain(`'${n}'`);
    expect(err.message).not.toContain(`'encode'`);
  });

  it('a node that consumes its own output (self-loop)', () => {
    const err = rejects(spec([node('refine', { prompt: 'text', latents: 'latents' }, { latents: 'latents' })]));
    expect(err.message).toMatch(/cycle/);
    expect(err.message).toContain(`'refine'`);
  });

  it('a node using a component the spec does not declare', () => {
    const err = rejects(
      spec([node('encode', { prompt: 'text' }, { embeds: 'embeds' }, { components: ['text_encoder'] })], { components: { vae: { tasks: BOTH } } }),
    );
    expect(err.message).toMatch(/node 'encode'/);
    expect(err.message).toMatch(/component 'text_encoder'/);
  });

  it('a component whose declared tasks miss a deployed task its node needs', () => {
    const s = () =>
      spec([node('decode', { prompt: 'text' }, { video: 'video' }, { components: ['vae'], tasks: ['T2V', 'T2I'] })], {
        components: { vae: { tasks: ['T2V'] } },
      });
    const err = rejects(s(), BOTH);
    expect(err.message).toMatch(/node 'decode'/);
    expect(err.message).toMatch(/component 'vae'/);
    expect(err.message).toMatch(/T2I/);
    // The same spec is fine for a deployment that does not serve the missing task.
    expect(() => buildPipeline(s(), { tasks: ['T2V'] })).not.toThrow();
  });

  it('two policies claiming one slot', () => {
    const err = rejects(
      spec([node('denoise', { prompt: 'text' }, { latents: 'latents' }, { policies: [CFGPolicy.classic(), ExpertRouting.single(), CFGPolicy.batched()] })]),
    );
    expect(err.message).toMatch(/node 'denoise'/);
    expect(err.message).toMatch(/'guidance'/);
    expect(err.message).toContain(CFGPolicy.classic().name);
    expect(err.message).toContain(CFGPolicy.batched().name);
    // One policy per slot is fine.
    expect(() =>
      buildPipeline(
        spec([
          node('denoise', { prompt: 'text' }, { latents: 'latents' }, { policies: [CFGPolicy.batched(), ExpertRouting.single(), FlowShiftPolicy.fixed()] }),
        ]),
        { tasks: BOTH },
      ),
    ).not.toThrow();
  });

  it('duplicate node names', () => {
    const err = rejects(spec([node('encode', { prompt: 'text' }, { embeds: 'embeds' }), node('encode', { prompt: 'text' }, { other: 'embeds' })]));
    expect(err.message).toMatch(/node 'encode'/);
    expect(err.message).toMatch(/twice/);
  });
});

describe('BuiltPipeline.parseNodeParams', () => {
  const built = buildPipeline(
    spec([
      node('encode', { prompt: 'text' }, { embeds: 'embeds' }),
      node('denoise', { embeds: 'embeds' }, { latents: 'latents' }, { params: DenoiseNodeParamsSchema }),
      node('upscale', { latents: 'latents' }, { video: 'video' }, { params: z.strictObject({ factor: z.number().int().min(1).max(4).default(2) }) }),
    ]),
    { tasks: BOTH },
  );

  it('accepts undefined and {} as no overrides', () => {
    expect(built.parseNodeParams(undefined)).toEqual({});
    expect(built.parseNodeParams({})).toEqual({});
  });

  it('rejects an unknown node, naming it and listing the nodes', () => {
    const err = catchOmni(() => built.parseNodeParams({ sharpen: { amount: 1 } }), 'OMNIRX_ERR_INVALID_REQUEST');
    expect(err.param).toBe('nodeParams.sharpen');
    expect(err.message).toMatch(/'sharpen'/);
    expect(err.message).toMatch(/denoise/);
  });

  it('rejects params for a node that takes none', () => {
    const err = catchOmni(() => built.parseNodeParams({ encode: {} }), 'OMNIRX_ERR_INVALID_REQUEST');
    expect(err.param).toBe('nodeParams.encode');
    expect(err.message).toMatch(/no parameters/);
  });

  it('rejects a schema failure with the dotted param path', () => {
    const err = catchOmni(() => built.parseNodeParams({ denoise: { sigmas: [0.5, 0.9, 0] } }), 'OMNIRX_ERR_INVALID_REQUEST');
    expect(err.param).toBe('nodeParams.denoise.sigmas');
    expect(err.message).toMatch(/^nodeParams\.denoise\.sigmas: /);
    expect(err.message).toMatch(/decreasing/);
    const strict = catchOmni(() => built.parseNodeParams({ denoise: { sigmaz: [1, 0] } }), 'OMNIRX_ERR_INVALID_REQUEST');
    expect(strict.param).toMatch(/^nodeParams\.denoise/);
    const nested = catchOmni(() => built.parseNodeParams({ denoise: { sigmas: [1, 'x', 0] } }), 'OMNIRX_ERR_INVALID_REQUEST');
    expect(nested.param).toBe('nodeParams.denoise.sigmas.1');
  });

  it('returns the parsed values (schema defaults applied) keyed by node', () => {
    expect(built.parseNodeParams({ denoise: { sigmas: [1, 0.5, 0] }, upscale: {} })).toEqual({ denoise: { sigmas: [1, 0.5, 0] }, upscale: { factor: 2 } });
  });
});

describe('wanT2VPipelineSpec', () => {
  it('builds for T2V: text_encoder → denoise → decode_video, export_latents fanning out from latents', () => {
    const built = buildPipeline(wanT2VPipelineSpec(defaultPolicies()), { tasks: ['T2V'] });
    expect(built.order[0].name).toBe('text_encoder');
    expect(built.order[1].name).toBe('denoise');
    expect(built.order.find((n) => n.name === 'denoise')!.run.kind).toBe('loop');
    expect(names(built.activeNodes(params({ task: 'T2V' })))).toEqual(['text_encoder', 'denoise', 'decode_video']);
    const withLatents = names(built.activeNodes(params({ task: 'T2V', returnLatents: true })));
    expect(withLatents.slice(0, 2)).toEqual(['text_encoder', 'denoise']);
    expect(new Set(withLatents.slice(2))).toEqual(new Set(['decode_video', 'export_latents']));
    // Both consumers read the same `latents` edge (fan-out), neither depends on the other.
    const consumers = built.order.filter((n) => 'latents' in n.inputs).map((n) => n.name);
    expect(consumers).toEqual(expect.arrayContaining(['decode_video', 'decode_image', 'export_latents']));
    // The default (single) expert routing needs no second transformer.
    expect([...built.components].sort()).toEqual(['text_encoder', 'tokenizer', 'transformer', 'vae']);
    expect(() => built.activeNodes(params({ task: 'T2I' }))).toThrow(OmniError);
  });

  it('builds for T2I: decode_image instead of decode_video', () => {
    const built = buildPipeline(wanT2VPipelineSpec(defaultPolicies()), { tasks: ['T2I'] });
    expect(names(built.activeNodes(params({ task: 'T2I', numFrames: 1 })))).toEqual(['text_encoder', 'denoise', 'decode_image']);
    const withLatents = names(built.activeNodes(params({ task: 'T2I', numFrames: 1, returnLatents: true })));
    expect(withLatents.slice(0, 2)).toEqual(['text_encoder', 'denoise']);
    expect(new Set(withLatents.slice(2))).toEqual(new Set(['decode_image', 'export_latents']));
  });

  it('boundary expert routing adds transformer_2 to the components to load', () => {
    const built = buildPipeline(wanT2VPipelineSpec({ ...defaultPolicies(), expert: ExpertRouting.boundary('transformer', 'transformer_2', 0.9) }), {
      tasks: ['T2V'],
    });
    expect(built.components.has('transformer_2')).toBe(true);
  });

  it('its denoise node accepts nodeParams.denoise.sigmas', () => {
    const built = buildPipeline(wanT2VPipelineSpec(defaultPolicies()), { tasks: BOTH });
    expect(built.parseNodeParams({ denoise: { sigmas: [1, 0.6, 0.2, 0] } })).toEqual({ denoise: { sigmas: [1, 0.6, 0.2, 0] } });
    expect(catchOmni(() => built.parseNodeParams({ decode_video: {} }), 'OMNIRX_ERR_INVALID_REQUEST').param).toBe('nodeParams.decode_video');
  });
});

describe('DenoiseNodeParamsSchema', () => {
  const ok = (v: unknown) => DenoiseNodeParamsSchema.safeParse(v).success;
  const firstIssue = (v: unknown) => {
    const r = DenoiseNodeParamsSchema.safeParse(v);
    if (r.success) throw new Error(`expected ${JSON.stringify(v)} to be rejected`);
    return r.error.issues[0];
  };

  it('accepts a strictly decreasing schedule in [0, 1] ending at 0, and no schedule at all', () => {
    expect(ok({ sigmas: [1, 0.6, 0.2, 0] })).toBe(true);
    expect(ok({ sigmas: [0.5, 0] })).toBe(true);
    expect(ok({})).toBe(true);
  });

  it('rejects increasing or repeated sigmas', () => {
    expect(firstIssue({ sigmas: [0.2, 0.6, 0] }).message).toMatch(/strictly decreasing/);
    expect(firstIssue({ sigmas: [1, 0.5, 0.5, 0] }).message).toMatch(/strictly decreasing/);
  });

  it('rejects a last sigma other than 0', () => {
    const issue = firstIssue({ sigmas: [1, 0.5, 0.1] });
    expect(issue.message).toMatch(/last sigma must be 0/);
    expect(issue.path).toEqual(['sigmas']);
  });

  it('rejects values above 1 or below 0, too short schedules and unknown keys', () => {
    expect(firstIssue({ sigmas: [1.5, 0.5, 0] }).path).toEqual(['sigmas', 0]);
    expect(ok({ sigmas: [1, -0.5, 0] })).toBe(false);
    expect(ok({ sigmas: [0] })).toBe(false);
    expect(ok({ sigmas: [1, 0], steps: 3 })).toBe(false);
  });
});
