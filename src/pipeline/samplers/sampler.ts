import { flowMatchSigmas, stochasticEulerStep } from './flow-match-euler';

/**
 * Sampler interface shared by the flow-matching samplers (Euler, UniPC, DMD few-step).
 *
 * Conventions (rectified flow, as Wan 2.1): x_σ = (1 − σ)·x₀ + σ·ε, the model predicts the velocity v = ε − x₀ at
 * timestep t = σ·1000, and x₀ = x − σ·v. The caller evaluates the model at `sigmas[i]` on the current latents, then
 * calls `step(x, v, i)` for i = 0, 1, …, sigmas.length − 1 in order; after the last call `x` holds the sample.
 */

/** Per-request sampler state: created once per request (never shared), advanced once per denoise step. */
export interface SamplerState {
  /** Sigmas the model is evaluated at, in order (length = number of model evaluations). */
  readonly sigmas: Float64Array;
  /** Given the model's velocity prediction v at sigmas[i] for latents x (float32, any shape), updates x in place to the next state. */
  step(x: Float32Array, v: Float32Array, i: number): void;
}

export interface Sampler {
  readonly name: string;
  /**
   * A request's state. `rng` is the standard normal source for re-noising; `eta` the share of fresh noise in each
   * step's re-noising (Euler only: `stochasticEulerStep`; the other samplers accept 0 alone, default 0).
   */
  create(steps: number, shift: number, rng: () => number, eta?: number): SamplerState;
}

/** Throws RangeError unless `steps` is a positive integer and `shift` a positive finite number. */
export function checkStepsAndShift(who: string, steps: number, shift: number): void {
  if (!Number.isInteger(steps) || steps < 1) throw new RangeError(`${who}: steps must be a positive integer, got ${steps}`);
  if (!(shift > 0) || !Number.isFinite(shift)) throw new RangeError(`${who}: shift must be a positive finite number, got ${shift}`);
}

/** Throws RangeError unless `eta` is absent or 0: for the samplers without Euler's η re-noising (UniPC, DMD). */
export function checkNoEta(who: string, eta: number | undefined): void {
  if (eta !== undefined && eta !== 0) throw new RangeError(`${who}: eta (stochastic re-noising) is an Euler option; got ${eta}`);
}

/**
 * Bookkeeping every state shares: `step` must be called with i = 0, 1, … in order (multistep and re-noising
 * samplers depend on it), at most `sigmas.length` times, with x and v of one constant length.
 */
export class StepGuard {
  private next = 0;
  private size = -1;

  constructor(
    private readonly who: string,
    private readonly total: number,
  ) {}

  /** Validates one call and advances the counter. */
  check(x: Float32Array, v: Float32Array, i: number): void {
    if (this.next >= this.total) throw new RangeError(`${this.who}: all ${this.total} steps are done (step ${i} called)`);
    if (i !== this.next) throw new RangeError(`${this.who}: steps must be taken in order: expected step ${this.next}, got ${i}`);
    if (x.length !== v.length) throw new RangeError(`${this.who}: x has ${x.length} values, v has ${v.length}`);
    if (this.size >= 0 && x.length !== this.size) throw new RangeError(`${this.who}: x changed size from ${this.size} to ${x.length} between steps`);
    this.size = x.length;
    this.next++;
  }
}

/**
 * Flow-matching Euler (src/pipeline/samplers/flow-match-euler.ts) behind the sampler interface: sigmas are
 * `flowMatchSigmas(steps, shift)` without the terminal 0; step i is x ← x + (σ_{i+1} − σ_i)·v at η = 0
 * (deterministic, `rng` unused), else `stochasticEulerStep` with the request's η (fresh noise from `rng`, none at
 * the last step).
 * @throws RangeError from `create` for bad steps or shift, or η outside [0, 1].
 */
export const flowMatchEulerSampler: Sampler = {
  name: 'euler',
  create(steps, shift, rng, eta = 0) {
    checkStepsAndShift('euler', steps, shift);
    if (!(eta >= 0 && eta <= 1)) throw new RangeError(`euler: eta must lie in [0, 1], got ${eta}`);
    const schedule = flowMatchSigmas(steps, shift);
    const guard = new StepGuard('euler', steps);
    return {
      sigmas: schedule.slice(0, steps),
      step(x, v, i) {
        guard.check(x, v, i);
        stochasticEulerStep(x, v, schedule[i], schedule[i + 1], eta, rng);
      },
    };
  },
};
