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

/**
 * One stochastic Euler step of the flow (re-noising with a share η of fresh noise), in place on `x` (float32, any
 * shape): with the data and noise predictions x̂₀ = x − σ·v and ε̂ = x̂₀ + v (rectified flow, x_σ = (1 − σ)·x₀ + σ·ε),
 *
 *   x ← (1 − σ_next)·x̂₀ + σ_next·(√(1 − η²)·ε̂ + η·ε),  ε ~ N(0, 1) from `rng`, one draw per element in element order.
 *
 * η = 0 is the Euler step (the same map; `eulerStep` computes it and draws nothing). η = 1 re-noises x̂₀ with fresh
 * noise alone, as diffusers' `FlowMatchEulerDiscreteScheduler` with `stochastic_sampling=True` and the DMD sampler
 * do. Between them it is DDIM's generalised step (Song et al. 2021, "Denoising Diffusion Implicit Models", eq. 12:
 * x_prev = α'·x̂₀ + √(s'² − σ_t²)·ε̂ + σ_t·ε) on the rectified-flow interpolant (α' = 1 − σ_next, s' = σ_next) with
 * its fresh-noise scale σ_t = η·σ_next; the marginal noise level stays σ_next whatever η. At σ_next = 0 the step
 * returns x̂₀ and draws nothing.
 * @throws RangeError when x and v differ in length, η is outside [0, 1], or `rng` returns a non-finite value (`x` is
 *   then updated up to that element).
 */
export function stochasticEulerStep(x: Float32Array, v: Float32Array, sigma: number, sigmaNext: number, eta: number, rng: () => number): void {
  if (x.length !== v.length) throw new RangeError(`stochasticEulerStep: x has ${x.length} values, v has ${v.length}`);
  if (!(eta >= 0 && eta <= 1)) throw new RangeError(`stochasticEulerStep: eta must lie in [0, 1], got ${eta}`);
  if (eta === 0 || sigmaNext === 0) {
    eulerStep(x, v, sigma, sigmaNext);
    return;
  }
  const keep = Math.sqrt(1 - eta * eta);
  for (let i = 0; i < x.length; i++) {
    const eps = rng();
    if (!Number.isFinite(eps)) throw new RangeError(`stochasticEulerStep: rng returned a non-finite value (${eps})`);
    const x0 = x[i] - sigma * v[i];
    x[i] = (1 - sigmaNext) * x0 + sigmaNext * (keep * (x0 + v[i]) + eta * eps);
  }
}
