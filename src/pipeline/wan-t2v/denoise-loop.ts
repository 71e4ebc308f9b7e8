import { OmniError } from '../../errors';
import { createTensor, type NativeTensor } from '../../native/binding';
import type { DiTShape } from '../../models/wan/dit';
import { Rng } from '../../util/rng';
import { applyClassifierFreeGuidance, firstNonFinite } from '../guidance';
import { eulerStep, flowMatchSigmas } from '../samplers/flow-match-euler';
import type { LoopStage, StepResult } from '../stage';
import { latentShape, type WanT2VContext } from './context';
import type { WanT2VState } from './state';

/** Per-request state of the denoise loop. */
export interface DenoiseLoopState {
  shape: DiTShape;
  sigmas: Float64Array;
  index: number;
  latents: NativeTensor;
  cond: NativeTensor;
  uncond: NativeTensor | undefined;
  timestep: NativeTensor;
  context: NativeTensor;
  negative: NativeTensor | undefined;
  guidance: number;
  /** Set when finalize hands the latents to the request state. */
  latentsTaken: boolean;
}

/**
 * `denoise` node: flow-matching Euler sampling with shift and classic (two-forward) classifier-free guidance.
 * `init` draws the initial noise `[1, C, F, h, w]` ~ N(0, 1) from the request's seed; each `step` runs the
 * conditional (and unconditional) DiT forward at σᵢ, combines them, checks for non-finite values and takes one
 * Euler step to σᵢ₊₁. The runtime calls `step` once per grant; there is no loop over timesteps here.
 */
export const denoiseLoop: LoopStage<WanT2VContext, WanT2VState, DenoiseLoopState> = {
  name: 'denoise',

  init(ctx, state) {
    if (state.promptEmbeds === undefined) throw new Error('denoise: the text_encoder output is missing');
    const [C, F, h, w] = latentShape(ctx);
    const tr = ctx.model.transformer;
    const guided = ctx.params.guidanceScale !== 1;
    const latents = createTensor(ctx.native, [1, C, F, h, w]);
    new Rng(ctx.params.seed).fillNormal(latents.data);
    return {
      shape: { frames: F, height: h, width: w, textLen: ctx.model.textEncoder.config.maxLength },
      sigmas: flowMatchSigmas(ctx.params.numInferenceSteps, ctx.params.flowShift),
      index: 0,
      latents,
      cond: createTensor(ctx.native, [1, C, F, h, w]),
      uncond: guided ? createTensor(ctx.native, [1, C, F, h, w]) : undefined,
      timestep: createTensor(ctx.native, [1, tr.config.freqDim]),
      context: state.promptEmbeds,
      negative: guided ? state.negativeEmbeds : undefined,
      guidance: ctx.params.guidanceScale,
      latentsTaken: false,
    };
  },

  async step(ctx, loop): Promise<StepResult> {
    const i = loop.index;
    const sigma = loop.sigmas[i];
    const t = sigma * 1000;
    const tr = ctx.model.transformer;
    await tr.forward(loop.shape, { latents: loop.latents, context: loop.context, timestep: loop.timestep, out: loop.cond }, t);
    if (loop.uncond !== undefined && loop.negative !== undefined) {
      if (ctx.signal.aborted) return { done: true };
      await tr.forward(loop.shape, { latents: loop.latents, context: loop.negative, timestep: loop.timestep, out: loop.uncond }, t);
      applyClassifierFreeGuidance(loop.cond.data, loop.uncond.data, loop.guidance);
    }
    const bad = firstNonFinite(loop.cond.data);
    if (bad >= 0) {
      throw new OmniError('OMNIRX_ERR_NON_FINITE', `denoise step ${i}: the model produced a non-finite value (${loop.cond.data[bad]}) at element ${bad}`);
    }
    eulerStep(loop.latents.data, loop.cond.data, sigma, loop.sigmas[i + 1]);
    loop.index = i + 1;
    return { done: loop.index === loop.sigmas.length - 1, progress: { index: i, total: loop.sigmas.length - 1, timestep: t, sigma } };
  },

  finalize(_ctx, loop, state) {
    state.latents = state.own(loop.latents);
    loop.latentsTaken = true;
  },

  release(loop) {
    if (!loop.latentsTaken) loop.latents.dispose();
    loop.cond.dispose();
    loop.uncond?.dispose();
    loop.timestep.dispose();
  },
};
