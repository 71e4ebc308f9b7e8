import { OmniError } from 'omnirx';
import type { RequestContext } from 'omnirx/families';
import {
  flowMatchSigmas,
  RequestState,
  stochasticEulerStep,
  type LoopStage,
  type PipelineSpec,
  type ResolvedParams,
  type Stage,
  type StepCost,
} from 'omnirx/pipeline';
import type { ToyImageModel } from './model';
import { TOY_FAMILY } from './spec';

/** What every node of a toy-image request sees. */
export type ToyContext = RequestContext<ToyImageModel>;

/** Request state of the toy-image graph: one slot per edge, plain JS arrays (nothing native to free). */
export class ToyState extends RequestState {
  /** embed_text → denoise: the prompt's embedding `[dim]`. */
  text?: Float32Array;
  /** embed_text → denoise: the negative prompt's embedding `[dim]` (only when some step is guided). */
  negative?: Float32Array;
  /** denoise → render: the denoised image `[3, H, W]`. */
  image?: Float32Array;
}

/** Whether step `i` runs the negative-prompt forward too: a scale other than 1, inside the guidance interval. */
export function guidedStep(p: Pick<ResolvedParams, 'guidanceScale' | 'guidanceInterval' | 'numInferenceSteps'>, i: number): boolean {
  const f = i / p.numInferenceSteps;
  return p.guidanceScale !== 1 && f >= p.guidanceInterval[0] && f < p.guidanceInterval[1];
}

/** Steps of a request that are guided. */
export function guidedSteps(p: Pick<ResolvedParams, 'guidanceScale' | 'guidanceInterval' | 'numInferenceSteps'>): number {
  let n = 0;
  for (let i = 0; i < p.numInferenceSteps; i++) if (guidedStep(p, i)) n++;
  return n;
}

/** mulberry32: a 32-bit seeded generator of uniforms in [0, 1). */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Standard normals from a seed (Box–Muller over mulberry32). */
export function normals(seed: number): () => number {
  const u = mulberry32(seed);
  return () => Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u());
}

/** `embed_text`: the prompt's hashed bag-of-words embedding, and the negative prompt's when a step will be guided. */
export const embedTextStage: Stage<ToyContext, ToyState> = {
  name: 'embed_text',
  async forward(ctx, state) {
    const e = ctx.model.embedder;
    state.text = e.embed(ctx.params.prompt);
    if (guidedSteps(ctx.params) > 0) state.negative = e.embed(ctx.params.negativePrompt);
  },
};

/** Per-request state of the denoise loop. */
export interface ToyLoop {
  /** The image being denoised, `[3, H, W]`: pure noise at σ = 1. */
  x: Float32Array;
  /** The velocity of the step (guided: the combination). */
  v: Float32Array;
  /** The negative prompt's velocity (guided steps). */
  vNeg: Float32Array;
  text: Float32Array;
  negative?: Float32Array;
  /** σ₀ … σ_N = 0 (N + 1 values). */
  sigmas: Float64Array;
  index: number;
  /** Fresh noise of the re-noising Euler step (η > 0), its own stream derived from the seed. */
  renoise: () => number;
}

const steps = (loop: ToyLoop) => loop.sigmas.length - 1;

/**
 * `denoise`: flow matching in pixel space. `init` draws the image `[3, H, W]` ~ N(0, 1) from the seed; each `step` —
 * one per grant of the engine's step scheduler — runs the denoiser once (twice when guided: v = v⁻ + s·(v⁺ − v⁻)) and
 * takes one Euler step from σᵢ to σᵢ₊₁ (re-noised by η); `finalize` hands the image to `render`.
 */
export const denoiseLoop: LoopStage<ToyContext, ToyState, ToyLoop> = {
  name: 'denoise',

  init(ctx, state) {
    if (state.text === undefined) throw new Error('denoise: the embed_text output is missing');
    const { width, height, seed, numInferenceSteps, flowShift } = ctx.params;
    const n = 3 * width * height;
    const x = new Float32Array(n);
    const noise = normals(seed);
    for (let i = 0; i < n; i++) x[i] = noise();
    return {
      x,
      v: new Float32Array(n),
      vNeg: new Float32Array(n),
      text: state.text,
      negative: state.negative,
      sigmas: flowMatchSigmas(numInferenceSteps, flowShift),
      index: 0,
      renoise: normals((seed ^ 0x5bd1e995) >>> 0),
    };
  },

  async step(ctx, loop) {
    const { width, height, guidanceScale, eta } = ctx.params;
    const den = ctx.model.denoiser;
    const i = loop.index;
    const sigma = loop.sigmas[i];
    den.forward(loop.x, width, height, sigma, loop.text, loop.v);
    if (guidedStep(ctx.params, i)) {
      if (loop.negative === undefined) throw new Error('denoise: a guided step without the negative embedding');
      den.forward(loop.x, width, height, sigma, loop.negative, loop.vNeg);
      for (let k = 0; k < loop.v.length; k++) loop.v[k] = loop.vNeg[k] + guidanceScale * (loop.v[k] - loop.vNeg[k]);
    }
    const bad = loop.v.findIndex((a) => !Number.isFinite(a));
    if (bad >= 0) throw new OmniError('OMNIRX_ERR_NON_FINITE', `denoise step ${i}: the denoiser produced ${loop.v[bad]} at element ${bad}`);
    stochasticEulerStep(loop.x, loop.v, sigma, loop.sigmas[i + 1], eta, loop.renoise);
    loop.index = i + 1;
    return { done: loop.index === steps(loop), progress: { index: i, total: steps(loop), timestep: sigma * 1000, sigma } };
  },

  cost(ctx, loop): StepCost {
    return {
      model: `${ctx.model.spec.id}/denoiser`,
      phase: 'denoise',
      shape: `${ctx.params.height}x${ctx.params.width}`,
      guidance: guidedStep(ctx.params, loop.index) ? 'cfg' : 'none',
    };
  },

  remaining(loop) {
    return steps(loop) - loop.index;
  },

  finalize(_ctx, loop, state) {
    state.image = loop.x;
  },

  release() {
    // JS arrays only.
  },
};

/** `render`: the denoised image through the colour decoder → the RGB24 `image` artifact. */
export const renderStage: Stage<ToyContext, ToyState> = {
  name: 'render',
  async forward(ctx, state) {
    if (state.image === undefined) throw new Error('render: the denoise output is missing');
    const { width, height } = ctx.params;
    state.artifacts.image = { kind: 'image', width, height, pixels: ctx.model.decoder.render(state.image, width, height) };
  },
};

const t2i = ['T2I'] as const;

/** The toy-image graph (T2I only): embed_text → denoise (loop) → render. It binds no policy. */
export function toyPipeline(): PipelineSpec<ToyContext, ToyState> {
  return {
    family: TOY_FAMILY,
    components: { embedder: { tasks: t2i }, denoiser: { tasks: t2i }, decoder: { tasks: t2i } },
    requestInputs: { prompt: 'text' },
    nodes: [
      {
        name: 'embed_text',
        run: { kind: 'stage', stage: embedTextStage },
        inputs: { prompt: 'text' },
        outputs: { embedding: 'toy.embedding' },
        components: ['embedder'],
        tasks: t2i,
      },
      {
        name: 'denoise',
        run: { kind: 'loop', stage: denoiseLoop },
        inputs: { embedding: 'toy.embedding' },
        outputs: { rgb: 'toy.rgb' },
        components: ['denoiser'],
        tasks: t2i,
      },
      {
        name: 'render',
        run: { kind: 'stage', stage: renderStage },
        inputs: { rgb: 'toy.rgb' },
        outputs: { image: 'image' },
        components: ['decoder'],
        tasks: t2i,
      },
    ],
  };
}
