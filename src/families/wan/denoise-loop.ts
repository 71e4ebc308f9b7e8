import { OmniError } from '../../errors';
import type { GuidanceInterval } from '../../request/guidance-interval';
import { createTensor } from '../../native/binding';
import type { DiTShape, ForwardRow } from '../../models/wan/dit';
import { renoiseSeed, Rng } from '../../util/rng';
import { applyClassifierFreeGuidance, firstNonFinite } from '../../pipeline/guidance';
import type { CFGPolicy, GuidancePlan } from '../../pipeline/policies/cfg';
import type { ExpertRouting } from '../../pipeline/policies/expert-routing';
import { stochasticEulerStep } from '../../pipeline/samplers/flow-match-euler';
import type { SamplerState } from '../../pipeline/samplers/sampler';
import type { SamplerPolicy } from '../../pipeline/policies/sampler-policy';
import type { LoopStage, StepResult } from '../../pipeline/stage';
import type { StepCost } from '../../pipeline/step-grants';
import { latentShape, type WanT2VContext } from './context';
import { decodePreview, predictedFirstFrame, previewDue } from './denoise-preview';
import type { WanT2VState } from './state';

/** Per-request state of the denoise loop (plain arrays: rows are copied into the DiT's staging tensors). */
export interface DenoiseLoopState {
  shape: Omit<DiTShape, 'batch'>;
  /** Sigmas the model is evaluated at (one per step), from the sampler. */
  sigmas: Float64Array;
  sampler: SamplerState;
  index: number;
  /** [C, F, h, w] */
  latents: Float32Array;
  cond: Float32Array;
  uncond: Float32Array;
  context: Float32Array;
  negative: Float32Array | undefined;
  scale: number;
  /** The request's guidance interval (fractions of the steps guided). */
  interval: GuidanceInterval;
}

/** Node parameters of `denoise`: an explicit sigma schedule replaces the shifted linear one. */
export interface DenoiseNodeParams {
  sigmas?: number[];
}

/**
 * `denoise` node: the request's sampler (Euler, UniPC or DMD, from the bound `SamplerPolicy`; Euler over the
 * request's `nodeParams.denoise.sigmas` when given) with a bound `CFGPolicy` (classic, batched or none, optionally interval-gated) and `ExpertRouting` (which
 * transformer runs each step). `init` draws the initial noise `[C, F, h, w]` ~ N(0, 1) from the request's seed.
 * Each step runs its guidance branches as rows of one or two batched DiT forwards, combines them, checks for
 * non-finite values and advances the sampler by one step. `step` is `stepMany` on a batch of one, so a step's bits do not
 * depend on whether the scheduler batched it with other requests.
 */
/** Euler over an explicit schedule `[σ_0, …, σ_N = 0]` (the request's `nodeParams.denoise.sigmas`), re-noised by η. */
function explicitSigmas(schedule: readonly number[], eta: number, rng: () => number): SamplerState {
  const s = Float64Array.from(schedule);
  return {
    sigmas: s.slice(0, s.length - 1),
    step: (x, v, i) => stochasticEulerStep(x, v, s[i], s[i + 1], eta, rng),
  };
}

export function createDenoiseLoop(policies: {
  cfg: CFGPolicy;
  expert: ExpertRouting;
  sampler: SamplerPolicy;
}): LoopStage<WanT2VContext, WanT2VState, DenoiseLoopState> {
  const { cfg, expert } = policies;
  const total = (loop: DenoiseLoopState) => loop.sigmas.length;
  const planOf = (loop: DenoiseLoopState): GuidancePlan => cfg.plan(loop.index, total(loop), loop.scale, loop.interval);
  const expertOf = (loop: DenoiseLoopState) => expert.select(loop.sigmas[loop.index] * 1000);
  const shapeKey = (loop: DenoiseLoopState) => `${loop.shape.frames}x${loop.shape.height}x${loop.shape.width}`;

  const stepMany = async (items: ReadonlyArray<{ ctx: WanT2VContext; loop: DenoiseLoopState }>): Promise<Array<StepResult | Error>> => {
    const { ctx: ctx0, loop: loop0 } = items[0];
    const name = expertOf(loop0);
    const dit = ctx0.model.transformer(name);
    const plans = items.map(({ loop }) => planOf(loop));
    const first: ForwardRow[] = [];
    const second: ForwardRow[] = [];
    items.forEach(({ loop }, i) => {
      if (expertOf(loop) !== name || shapeKey(loop) !== shapeKey(loop0)) throw new Error('denoise: a batch mixes experts or shapes');
      const t = loop.sigmas[loop.index] * 1000;
      first.push({ latents: loop.latents, context: loop.context, t, out: loop.cond });
      if (plans[i].dispatch === 'single') return;
      const uncond = { latents: loop.latents, context: loop.negative!, t, out: loop.uncond };
      (plans[i].dispatch === 'batched' ? first : second).push(uncond);
    });
    await dit.forwardRows(loop0.shape, first);
    if (second.length > 0 && !items.every(({ ctx }) => ctx.signal.aborted)) await dit.forwardRows(loop0.shape, second);
    const previews: Array<Float32Array | undefined> = [];
    const results = items.map(({ ctx, loop }, i): StepResult | Error => {
      const k = loop.index;
      const sigma = loop.sigmas[k];
      if (plans[i].dispatch !== 'single') applyClassifierFreeGuidance(loop.cond, loop.uncond, plans[i].scale);
      const bad = firstNonFinite(loop.cond);
      if (bad >= 0)
        return new OmniError('OMNIRX_ERR_NON_FINITE', `denoise step ${k}: the model produced a non-finite value (${loop.cond[bad]}) at element ${bad}`);
      if (previewDue(k, total(loop), ctx.params.previewEvery)) previews[i] = predictedFirstFrame(loop.latents, loop.cond, sigma, latentShape(ctx));
      loop.sampler.step(loop.latents, loop.cond, k);
      loop.index = k + 1;
      return { done: loop.index === total(loop), progress: { index: k, total: total(loop), timestep: sigma * 1000, sigma } };
    });
    for (const [i, frame0] of previews.entries()) {
      const r = results[i];
      if (frame0 === undefined || r instanceof Error) continue;
      const image = await decodePreview(items[i].ctx, frame0);
      if (image !== undefined) r.emit = [image];
    }
    return results;
  };

  return {
    name: 'denoise',

    init(ctx, state) {
      if (state.promptEmbeds === undefined) throw new Error('denoise: the text_encoder output is missing');
      const [C, F, h, w] = latentShape(ctx);
      const n = C * F * h * w;
      const latents = new Float32Array(n);
      new Rng(ctx.params.seed).fillNormal(latents);
      const custom = (ctx.nodeParams.denoise as DenoiseNodeParams | undefined)?.sigmas;
      // Re-noising (DMD, Euler at η > 0) draws from its own stream, derived from the seed.
      const renoise = new Rng(renoiseSeed(ctx.params.seed));
      const normal = () => renoise.normal();
      const { eta } = ctx.params;
      const sampler =
        custom !== undefined
          ? explicitSigmas(custom, eta, normal)
          : policies.sampler.sampler(ctx.params.sampler).create(ctx.params.numInferenceSteps, ctx.params.flowShift, normal, eta);
      return {
        shape: { frames: F, height: h, width: w, textLen: ctx.model.spec.textEncoder.maxLength },
        sigmas: sampler.sigmas,
        sampler,
        index: 0,
        latents,
        cond: new Float32Array(n),
        uncond: new Float32Array(n),
        context: Float32Array.from(state.promptEmbeds.data),
        negative: state.negativeEmbeds === undefined ? undefined : Float32Array.from(state.negativeEmbeds.data),
        scale: ctx.params.guidanceScale,
        interval: ctx.params.guidanceInterval,
      };
    },

    async step(ctx, loop) {
      const [r] = await stepMany([{ ctx, loop }]);
      if (r instanceof Error) throw r;
      return r;
    },

    cost(ctx, loop): StepCost {
      return { model: `${ctx.model.spec.id}/${expertOf(loop)}`, phase: 'denoise', shape: shapeKey(loop), guidance: planOf(loop).dispatch };
    },

    remaining(loop) {
      return total(loop) - loop.index;
    },

    batching: {
      maxBatch: 4,
      // Image steps at one resolution and expert batch across requests; video steps run alone (memory-bound).
      batchKey: (ctx, loop) => (loop.shape.frames === 1 ? `${ctx.model.spec.id}|${expertOf(loop)}|${shapeKey(loop)}` : undefined),
      stepMany,
    },

    finalize(ctx, loop, state) {
      const [C, F, h, w] = latentShape(ctx);
      state.latents = state.own(createTensor(ctx.native, [1, C, F, h, w], loop.latents));
    },

    release() {
      // The loop holds only JS arrays; nothing native to free.
    },
  };
}
