import { checkNoEta, checkStepsAndShift, StepGuard, type Sampler, type SamplerState } from './sampler';

/**
 * Few-step sampling for distribution-matching-distilled generators: DMD (Yin et al. 2024, "One-step Diffusion with
 * Distribution Matching Distillation") as run by CausVid / Self-Forcing (`pipeline/causal_inference.py`, per block):
 * for each timestep t_k of the `denoising_step_list` (default [1000, 750, 500, 250]) the generator is evaluated at
 * σ_k, its flow prediction is turned into the data prediction x₀ = x − σ_k·v (`_convert_flow_pred_to_x0`), and
 *
 *  - if k is not the last step, x is re-noised to the next listed timestep with fresh noise
 *    (`FlowMatchScheduler.add_noise`): x = (1 − σ_{k+1})·x₀ + σ_{k+1}·ε, ε ~ N(0, 1) drawn from `rng`, one value
 *    per element in element order;
 *  - the last step returns x₀.
 *
 * Sigmas: σ_k = shift(t_k/1000) with the same time shift as the Euler schedule, σ' = s·σ/(1 + (s − 1)·σ), using the
 * `shift` given to `create`. shift = 1 uses the listed timesteps as they are; shift = 5 is Self-Forcing's
 * `warp_denoising_step` (its FlowMatchScheduler(shift=5, sigma_min=0, extra_one_step=True) 1000-entry table indexed
 * at 1000 − t equals shift(t/1000) up to float32 rounding, ~2e-8). The model is called by the caller at
 * t = σ_k·1000. `create(steps, …)` requires `steps` to equal the number of listed timesteps (a distilled generator is
 * only valid at its own list). Deterministic given `rng`.
 */

export const DEFAULT_DMD_TIMESTEPS: readonly number[] = Object.freeze([1000, 750, 500, 250]);

export interface DmdOptions {
  /** Timesteps in (0, 1000], strictly decreasing; default [1000, 750, 500, 250]. */
  timesteps?: readonly number[];
}

/** Throws RangeError unless `timesteps` is a non-empty, strictly decreasing list of numbers in (0, 1000]. */
function checkTimesteps(timesteps: readonly number[]): void {
  if (!Array.isArray(timesteps) || timesteps.length === 0) throw new RangeError('dmd: timesteps must be a non-empty list');
  timesteps.forEach((t, k) => {
    if (typeof t !== 'number' || !(t > 0 && t <= 1000)) throw new RangeError(`dmd: timesteps must lie in (0, 1000], got ${t} at index ${k}`);
    if (k > 0 && !(t < timesteps[k - 1])) throw new RangeError(`dmd: timesteps must be strictly decreasing, got ${timesteps[k - 1]} then ${t}`);
  });
}

/** σ_k = shift(t_k / 1000) for each listed timestep. */
export function dmdSigmas(timesteps: readonly number[], shift: number): Float64Array {
  checkTimesteps(timesteps);
  checkStepsAndShift('dmd', timesteps.length, shift);
  return Float64Array.from(timesteps, (t) => {
    const s = t / 1000;
    return (shift * s) / (1 + (shift - 1) * s);
  });
}

export interface DmdSampler extends Sampler {
  /** The timestep list; `create` must be called with steps = timesteps.length. */
  readonly timesteps: readonly number[];
}

export function dmdSampler(options: DmdOptions = {}): DmdSampler {
  const timesteps = Object.freeze((options.timesteps ?? DEFAULT_DMD_TIMESTEPS).slice());
  checkTimesteps(timesteps);
  return {
    name: 'dmd',
    timesteps,
    create(steps: number, shift: number, rng: () => number, eta?: number): SamplerState {
      checkStepsAndShift('dmd', steps, shift);
      checkNoEta('dmd', eta);
      if (steps !== timesteps.length)
        throw new RangeError(`dmd: this sampler has ${timesteps.length} timesteps [${timesteps.join(', ')}], got steps = ${steps}`);
      if (typeof rng !== 'function') throw new RangeError('dmd: rng must be a function returning standard normal samples');
      const sigmas = dmdSigmas(timesteps, shift);
      const guard = new StepGuard('dmd', steps);
      return {
        sigmas,
        step(x: Float32Array, v: Float32Array, i: number): void {
          guard.check(x, v, i);
          const sigma = sigmas[i];
          if (i === steps - 1) {
            for (let j = 0; j < x.length; j++) x[j] = x[j] - sigma * v[j];
            return;
          }
          const next = sigmas[i + 1];
          for (let j = 0; j < x.length; j++) {
            const eps = rng();
            if (!Number.isFinite(eps)) throw new RangeError(`dmd: rng returned a non-finite value (${eps})`);
            const x0 = x[j] - sigma * v[j];
            x[j] = (1 - next) * x0 + next * eps;
          }
        },
      };
    },
  };
}

/** DMD / Self-Forcing sampler with the default timesteps [1000, 750, 500, 250]. */
export const dmd: DmdSampler = dmdSampler();
