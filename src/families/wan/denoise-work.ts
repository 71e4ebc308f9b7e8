import type { ResolvedParams } from '../../pipeline/params';
import type { CFGPolicy } from '../../pipeline/policies/cfg';
import type { DenoiseNodeParams } from './denoise-loop';

/** What a request's denoise loop will run: its steps and how many of them classifier-free guidance runs on. */
export interface DenoiseWork {
  /** Denoise steps: a custom sigma schedule's length − 1, else `numInferenceSteps`. */
  steps: number;
  /** Steps the CFG policy guides (two DiT forwards each), by the request's scale and guidance interval. */
  guidedSteps: number;
  /** DiT forwards in all: `steps + guidedSteps`. */
  forwards: number;
}

/**
 * The denoise work of a resolved request, step by step as the denoise loop plans it (`CFGPolicy.plan` with the
 * request's guidance interval). The engine and the disaggregated front report it in `admitted`; the text encoder
 * encodes the negative prompt only when `guidedSteps > 0` (an interval that holds no step i/N needs none).
 */
export function denoiseWork(p: ResolvedParams, nodeParams: Record<string, unknown>, cfg: CFGPolicy): DenoiseWork {
  const custom = (nodeParams.denoise as DenoiseNodeParams | undefined)?.sigmas;
  const steps = custom !== undefined ? custom.length - 1 : p.numInferenceSteps;
  let guidedSteps = 0;
  for (let i = 0; i < steps; i++) if (cfg.plan(i, steps, p.guidanceScale, p.guidanceInterval).dispatch !== 'single') guidedSteps++;
  return { steps, guidedSteps, forwards: steps + guidedSteps };
}
