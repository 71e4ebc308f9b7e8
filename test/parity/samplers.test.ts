/**
 * Parity of omnirx's UniPC, DMD and η-re-noised Euler samplers with an independent PyTorch reference
 * (tools/reference/samplers_reference.py: Wan 2.1's FlowUniPCMultistepScheduler structure; Self-Forcing's few-step
 * loop; DDIM's eq. 12 on the rectified-flow interpolant). The fixture test/fixtures/reference/samplers.json (tools/reference/make_sampler_fixtures.py) holds, for a
 * closed-form velocity field v(x, σ) = a·x + b·tanh(x) + σ·c + d and a fixed initial noise, the whole float64
 * trajectory of each configuration; DMD's and η-Euler's re-noising ε is stored too and replayed here as the sampler's rng. torch
 * is NOT needed to run this test; see tools/reference/README.md to regenerate the fixture.
 *
 * Tolerance: every intermediate state, max|ours − ref| / max|ref| ≤ 1e-5. omnirx keeps the state (x, the data
 * predictions, the corrector's restart sample) and the model output in float32, with float64 coefficients and
 * float64 per-element arithmetic; the reference is float64 throughout. Each step therefore adds float32 rounding
 * (~6e-8 relative) that the multistep updates carry forward; the same reference run in float32 differs from the
 * float64 one by ≤ 3.7e-7 on these trajectories (samplers.json `diagnostics.float32_vs_float64`), so 1e-5 leaves
 * ~25× headroom. Mistakes move the trajectories by far more (`diagnostics.sensitivity`): Wan's σ_max 0.999 instead
 * of 1 ≥ 3e-4, no corrector ≥ 9.7e-4, order 3 ≥ 9.4e-4, order 1 ≥ 5.8e-3, bh1 1.3e-2, Euler ≥ 2e-2, DMD re-noising with the wrong σ or
 * without the shift ≥ 0.28, Euler with η ignored, halved or its ε one step off ≥ 0.32. Sigma lists: ≤ 1e-12 absolute (float64 on both sides; they differ only in how
 * linspace rounds).
 *
 * Set OMNIRX_PARITY_REPORT=1 to print the measured errors.
 */
import { dmdSampler } from '../../src/pipeline/samplers/dmd';
import { flowMatchEulerSampler, type SamplerState } from '../../src/pipeline/samplers/sampler';
import { uniPCSampler, WAN_UNIPC_SIGMA_MAX } from '../../src/pipeline/samplers/unipc';
import { maxAbsErr, maxRelErr, ParityReport, readJson, REFERENCE_DIR } from '../helpers/fixtures';

const STATE_TOL = 1e-5;
const SIGMA_ABS_TOL = 1e-12;

interface UniPCConfig {
  name: string;
  steps: number;
  shift: number;
  sigmaMax: number;
  disableCorrector: number[];
  sigmas: number[];
  trajectory: number[][];
}

interface DmdConfig {
  name: string;
  timesteps: number[];
  shift: number;
  sigmas: number[];
  renoise: number[][];
  trajectory: number[][];
}

interface EulerEtaConfig {
  name: string;
  steps: number;
  shift: number;
  eta: number;
  sigmas: number[];
  renoise: number[][];
  trajectory: number[][];
}

interface SamplerFixture {
  shape: number[];
  model: { a: number[]; b: number[]; c: number[]; d: number[] };
  noise: number[];
  unipc: UniPCConfig[];
  dmd: DmdConfig[];
  euler_eta: EulerEtaConfig[];
  diagnostics: { wan_sigma_max: number; float32_vs_float64: Record<string, number> };
}

const fixture = readJson<SamplerFixture>(REFERENCE_DIR, 'samplers.json');

/** The fixture's closed-form model, evaluated in float64 on the float32 state and rounded to float32. */
function velocity(x: Float32Array, sigma: number, out: Float32Array): Float32Array {
  const { a, b, c, d } = fixture.model;
  for (let j = 0; j < x.length; j++) out[j] = a[j] * x[j] + b[j] * Math.tanh(x[j]) + sigma * c[j] + d[j];
  return out;
}

/** Runs a sampler state from the fixture's noise; returns every state [x₀, …, x_N] as float64 copies. */
function run(state: SamplerState): Float64Array[] {
  const x = Float32Array.from(fixture.noise);
  const v = new Float32Array(x.length);
  const traj = [Float64Array.from(x)];
  state.sigmas.forEach((sigma, i) => {
    state.step(x, velocity(x, sigma, v), i);
    traj.push(Float64Array.from(x));
  });
  return traj;
}

/** An rng replaying the fixture's re-noising ε in order; throws if asked for more. */
function replay(renoise: number[][]): { rng: () => number; used: () => number; total: number } {
  const values = renoise.flat();
  let k = 0;
  return {
    rng: () => {
      if (k >= values.length) throw new Error('replay rng exhausted');
      return values[k++];
    },
    used: () => k,
    total: values.length,
  };
}

/** Checks every state of `traj` against the reference `ref` (≤ STATE_TOL each, throws naming the state); returns the worst error. */
function worstStateErr(name: string, traj: readonly Float64Array[], ref: readonly number[][]): number {
  let worst = 0;
  traj.forEach((x, k) => {
    const e = maxRelErr(x, ref[k]);
    if (!(e <= STATE_TOL)) throw new Error(`${name}: state ${k} max relative error ${e.toExponential(3)} > ${STATE_TOL}`);
    worst = Math.max(worst, e);
  });
  return worst;
}

const noRng = (): number => {
  throw new Error('UniPC must not draw noise');
};

describe('sampler parity with the PyTorch reference (tools/reference/samplers_reference.py)', () => {
  const report = new ParityReport();

  afterAll(() => {
    report.print('sampler parity: max relative error over all states (abs for sigmas)', 48);
  });

  it('the fixture is the expected one', () => {
    expect(fixture.shape.reduce((p, d) => p * d, 1)).toBe(fixture.noise.length);
    expect(fixture.unipc.map((c) => c.name)).toHaveLength(10);
    expect(fixture.dmd.map((c) => c.name)).toHaveLength(3);
    expect(fixture.euler_eta.map((c) => c.eta)).toEqual([1, 0.6, 0.3]);
    expect(fixture.diagnostics.wan_sigma_max).toBe(WAN_UNIPC_SIGMA_MAX);
  });

  describe('UniPC-2 bh2 (Wan FlowUniPCMultistepScheduler)', () => {
    it.each(fixture.unipc.map((c) => [c.name, c] as const))('%s: sigmas and every intermediate state', (name, cfg) => {
      const state = uniPCSampler({ sigmaMax: cfg.sigmaMax, disableCorrector: cfg.disableCorrector }).create(cfg.steps, cfg.shift, noRng);
      const sigErr = report.record(`${name} sigmas`, maxAbsErr(state.schedule, cfg.sigmas));
      expect(sigErr).toBeLessThanOrEqual(SIGMA_ABS_TOL);
      expect(state.sigmas).toHaveLength(cfg.steps);
      expect(state.schedule[cfg.steps]).toBe(0);

      const traj = run(state);
      expect(traj).toHaveLength(cfg.trajectory.length);
      expect(Array.from(traj[0])).toEqual(cfg.trajectory[0]);
      report.record(name, worstStateErr(name, traj, cfg.trajectory));
    });
  });

  describe('DMD few-step (Self-Forcing denoising_step_list)', () => {
    it.each(fixture.dmd.map((c) => [c.name, c] as const))('%s: sigmas and every intermediate state, replaying the fixture noise', (name, cfg) => {
      const noise = replay(cfg.renoise);
      const state = dmdSampler({ timesteps: cfg.timesteps }).create(cfg.timesteps.length, cfg.shift, noise.rng);
      const sigErr = report.record(`${name} sigmas`, maxAbsErr(state.sigmas, cfg.sigmas));
      expect(sigErr).toBeLessThanOrEqual(SIGMA_ABS_TOL);

      const traj = run(state);
      expect(noise.used()).toBe(noise.total);
      expect(traj).toHaveLength(cfg.trajectory.length);
      report.record(name, worstStateErr(name, traj, cfg.trajectory));
    });
  });

  describe('Euler with η re-noising (DDIM-style, diffusers stochastic_sampling at η = 1)', () => {
    it.each(fixture.euler_eta.map((c) => [c.name, c] as const))('%s: sigmas and every intermediate state, replaying the fixture noise', (name, cfg) => {
      const noise = replay(cfg.renoise);
      const state = flowMatchEulerSampler.create(cfg.steps, cfg.shift, noise.rng, cfg.eta);
      const sigErr = report.record(`${name} sigmas`, maxAbsErr(state.sigmas, cfg.sigmas.slice(0, cfg.steps)));
      expect(sigErr).toBeLessThanOrEqual(SIGMA_ABS_TOL);

      const traj = run(state);
      expect(noise.used()).toBe(noise.total);
      expect(traj).toHaveLength(cfg.trajectory.length);
      report.record(name, worstStateErr(name, traj, cfg.trajectory));
    });
  });

  it('the reference float32-vs-float64 spread is well inside the tolerance (fixture sanity)', () => {
    for (const [k, e] of Object.entries(fixture.diagnostics.float32_vs_float64)) {
      if (!(e < STATE_TOL / 10)) throw new Error(`${k}: reference float32 vs float64 ${e} is not ≪ ${STATE_TOL}`);
    }
  });
});
