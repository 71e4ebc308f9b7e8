/**
 * Flow-matching sigma schedule with shift, as Wan 2.1's `get_sampling_sigmas` (wan/utils/fm_solvers.py):
 * σᵢ = 1 − i/N for i = 0..N−1 (linspace(1, 0, N+1) without the final 0), each shifted by
 * σ' = s·σ / (1 + (s − 1)·σ) (the time shift of SD3, Esser et al. 2024, §5.3.2), then a terminal 0.
 * Returns N + 1 sigmas. (diffusers' `FlowMatchEulerDiscreteScheduler` spaces its points differently.)
 * The model is called with the float timestep t = σ·1000; Wan's own multistep solvers truncate t to an integer.
 */
export function flowMatchSigmas(steps: number, shift: number): Float64Array {
  if (!Number.isInteger(steps) || steps < 1) throw new RangeError(`steps must be a positive integer, got ${steps}`);
  if (!(shift > 0)) throw new RangeError(`shift must be positive, got ${shift}`);
  const sigmas = new Float64Array(steps + 1);
  for (let i = 0; i < steps; i++) {
    const s = 1 - i / steps;
    sigmas[i] = (shift * s) / (1 + (shift - 1) * s);
  }
  sigmas[steps] = 0;
  return sigmas;
}

/**
 * One explicit Euler step of the flow ODE dx/dσ = v (rectified flow, x_σ = (1 − σ)·x₀ + σ·ε, v = ε − x₀):
 * x ← x + (σ_next − σ)·v, in place on `x` (float32, any shape).
 */
export function eulerStep(x: Float32Array, v: Float32Array, sigma: number, sigmaNext: number): void {
  if (x.length !== v.length) throw new RangeError(`eulerStep: x has ${x.length} values, v has ${v.length}`);
  const dt = sigmaNext - sigma;
  for (let i = 0; i < x.length; i++) x[i] += dt * v[i];
}
