import { DEFAULT_DMD_TIMESTEPS, dmd, dmdSampler, dmdSigmas } from '../../src/pipeline/samplers/dmd';
import { eulerStep, flowMatchSigmas, stochasticEulerStep } from '../../src/pipeline/samplers/flow-match-euler';
import { flowMatchEulerSampler, type SamplerState } from '../../src/pipeline/samplers/sampler';
import { Rng } from '../../src/util/rng';
import { uniPC, uniPCSampler, uniPCSigmas, WAN_UNIPC_SIGMA_MAX } from '../../src/pipeline/samplers/unipc';

const noRng = (): number => {
  throw new Error('this sampler must not draw noise');
};

/** Runs a state with `model`, returning [x₀, …, x_N] and the velocities passed. */
function run(state: SamplerState, x0: number[], model: (x: Float32Array, sigma: number) => number[]): { traj: number[][]; vs: number[][] } {
  const x = Float32Array.from(x0);
  const traj = [Array.from(x)];
  const vs: number[][] = [];
  state.sigmas.forEach((sigma, i) => {
    const v = Float32Array.from(model(x, sigma));
    vs.push(Array.from(v));
    state.step(x, v, i);
    traj.push(Array.from(x));
  });
  return { traj, vs };
}

function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, digits = 6): void {
  expect(actual.length).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) expect(actual[i]).toBeCloseTo(expected[i], digits);
}

describe('DMD few-step sampler', () => {
  it('2 steps on a 2-element x, by hand: x0 = x − σ·v, re-noise (1 − σ₁)·x0 + σ₁·ε, last step returns x0', () => {
    const eps = [0.25, -0.5];
    let k = 0;
    const state = dmdSampler({ timesteps: [1000, 500] }).create(2, 1, () => eps[k++]);
    expect(Array.from(state.sigmas)).toEqual([1, 0.5]);
    const x = new Float32Array([1, -2]);
    // σ = 1: x0 = [1, −2] − [0.5, 1] = [0.5, −3]; x = 0.5·x0 + 0.5·ε = [0.375, −1.75]
    state.step(x, new Float32Array([0.5, 1]), 0);
    expect(Array.from(x)).toEqual([0.375, -1.75]);
    expect(k).toBe(2);
    // σ = 0.5: x0 = [0.375, −1.75] − 0.5·[0.25, 1.5] = [0.25, −2.5]; no noise drawn
    state.step(x, new Float32Array([0.25, 1.5]), 1);
    expect(Array.from(x)).toEqual([0.25, -2.5]);
    expect(k).toBe(2);
  });

  it("sigmas are shift(t/1000): default list, shift 1 and Self-Forcing's shift 5", () => {
    expect(Array.from(DEFAULT_DMD_TIMESTEPS)).toEqual([1000, 750, 500, 250]);
    expect(Array.from(dmd.create(4, 1, noRng).sigmas)).toEqual([1, 0.75, 0.5, 0.25]);
    // 5·0.75/(1 + 4·0.75) = 0.9375; 5·0.5/3 = 5/6; 5·0.25/2 = 0.625
    const s = dmdSigmas(DEFAULT_DMD_TIMESTEPS, 5);
    expect(s[0]).toBe(1);
    expect(s[1]).toBeCloseTo(0.9375, 15);
    expect(s[2]).toBeCloseTo(5 / 6, 15);
    expect(s[3]).toBeCloseTo(0.625, 15);
    // shift 3 on [1000, 500]: 1.5/2 = 0.75
    expect(Array.from(dmdSampler({ timesteps: [1000, 500] }).create(2, 3, noRng).sigmas)).toEqual([1, 0.75]);
  });

  it('draws x.length normals per re-noising step, none at the last step, and is deterministic given the rng', () => {
    const make = (): { state: SamplerState; count: () => number } => {
      let n = 0;
      let seed = 1;
      const rng = (): number => {
        n++;
        seed = (seed * 16807) % 2147483647;
        return seed / 2147483647 - 0.5;
      };
      return { state: dmd.create(4, 3, rng), count: () => n };
    };
    const model = (x: Float32Array, sigma: number): number[] => Array.from(x, (v, j) => 0.3 * v + sigma * (j - 1));
    const a = make();
    const b = make();
    const ra = run(a.state, [0.5, -1, 2], model);
    const rb = run(b.state, [0.5, -1, 2], model);
    expect(a.count()).toBe(3 * 3);
    expect(ra.traj).toEqual(rb.traj);
  });

  it('rejects bad arguments', () => {
    expect(() => dmdSampler({ timesteps: [] })).toThrow(RangeError);
    expect(() => dmdSampler({ timesteps: [500, 750] })).toThrow(RangeError);
    expect(() => dmdSampler({ timesteps: [1000, 1000] })).toThrow(RangeError);
    expect(() => dmdSampler({ timesteps: [1001, 500] })).toThrow(RangeError);
    expect(() => dmdSampler({ timesteps: [1000, 0] })).toThrow(RangeError);
    expect(() => dmdSampler({ timesteps: [Number.NaN] })).toThrow(RangeError);
    expect(() => dmd.create(3, 1, noRng)).toThrow(RangeError); // the list has 4 timesteps
    expect(() => dmd.create(4, 0, noRng)).toThrow(RangeError);
    expect(() => dmd.create(4, Number.NaN, noRng)).toThrow(RangeError);
    expect(() => dmdSigmas([1000], -1)).toThrow(RangeError);
    const state = dmd.create(4, 1, () => Number.NaN);
    expect(() => state.step(new Float32Array(2), new Float32Array(2), 0)).toThrow(RangeError);
  });
});

describe('UniPC-2 bh2 sampler', () => {
  it("uses the Euler schedule (flowMatchSigmas) by default, and Wan's σ_max = float32(0.999) on request", () => {
    for (const [n, s] of [
      [1, 1],
      [4, 3],
      [20, 5],
    ]) {
      const state = uniPC.create(n, s, noRng);
      expect(Array.from(state.schedule)).toEqual(Array.from(flowMatchSigmas(n, s)));
      expect(Array.from(state.sigmas)).toEqual(Array.from(flowMatchSigmas(n, s).slice(0, n)));
    }
    expect(WAN_UNIPC_SIGMA_MAX).toBe(Math.fround(0.999));
    // linspace(0.999, 0, 3)[:-1] = [0.999, 0.4995], shift 1, then 0
    const w = uniPCSigmas(2, 1, WAN_UNIPC_SIGMA_MAX);
    expect(w[0]).toBe(WAN_UNIPC_SIGMA_MAX);
    expect(w[1]).toBeCloseTo(WAN_UNIPC_SIGMA_MAX / 2, 15);
    expect(w[2]).toBe(0);
  });

  it('orders: warm-up order 1, then 2, and order 1 for the final step (lower_order_final)', () => {
    expect(uniPC.create(1, 1).orders).toEqual([1]);
    expect(uniPC.create(2, 1).orders).toEqual([1, 1]);
    expect(uniPC.create(3, 1).orders).toEqual([1, 2, 1]);
    expect(uniPC.create(5, 1).orders).toEqual([1, 2, 2, 2, 1]);
  });

  it('the first (order-1) step from σ = 1 is the Euler step x − (1 − σ₁)·v', () => {
    const state = uniPC.create(4, 1, noRng); // σ₁ = 0.75
    const x = new Float32Array([1, -2]);
    state.step(x, new Float32Array([0.5, 1]), 0);
    expect(Array.from(x)).toEqual([0.875, -2.25]);
  });

  it('the first step from σ₀ < 1 is DPM-Solver-1 (σ₁/σ₀)·x + (α₁ − α₀σ₁/σ₀)·m₀, which equals Euler for flows', () => {
    // sigmaMax 0.8, 2 steps, shift 1: σ = [0.8, 0.4, 0]; m₀ = x − 0.8·v = [0.6, −2.8]; x₁ = 0.5·x + 0.5·m₀
    const state = uniPCSampler({ sigmaMax: 0.8 }).create(2, 1, noRng);
    expectClose(state.sigmas, [0.8, 0.4], 15);
    const x = new Float32Array([1, -2]);
    const v = new Float32Array([0.5, 1]);
    state.step(x, v, 0);
    expectClose(x, [0.8, -2.4], 6);
    const euler = new Float32Array([1, -2]);
    eulerStep(euler, v, 0.8, 0.4);
    expectClose(x, euler, 6);
  });

  it('3 steps from σ = 1 (σ = 1, 2/3, 1/3, 0) with v = x/2 + σ, by hand (UniC-1, the σ = 1 limit, final x0)', () => {
    // step 0: m₀ = x − v = [−1/2, −2]; x₁ = (2/3)·x + (1/3)·m₀ = [1/2, −2]
    // step 1: m₁ = x₁ − (2/3)·v(x₁) = [−1/9, −16/9]
    //   UniC-1 (h = ∞: hφ₁ = B(h) = −1, ρ = 1/2): x₁ᶜ = (2/3)·x + (1/3)·m₀ + (1/6)·(m₁ − m₀) = [61/108, −53/27]
    //   UniP-2, history m₀ at σ = 1 (r = −∞, term → 0), h = 2 ln 2: x₂ = (1/2)·x₁ᶜ + (1/2)·m₁ = [49/216, −101/54]
    // step 2: final order 1 to σ = 0: x₃ = m₂ = x₂ − (1/3)·v(x₂) = [101/1296, −541/324]
    const model = (x: Float32Array, sigma: number): number[] => Array.from(x, (v) => v / 2 + sigma);
    const { traj } = run(uniPC.create(3, 1, noRng), [1, -2], model);
    expectClose(traj[1], [1 / 2, -2]);
    expectClose(traj[2], [49 / 216, -101 / 54]);
    expectClose(traj[3], [101 / 1296, -541 / 324]);
    // without the corrector: x₂ = (1/2)·x₁ + (1/2)·m₁ = [7/36, −17/9], x₃ = [11/216, −91/54]
    const nc = run(uniPCSampler({ disableCorrector: [0] }).create(3, 1, noRng), [1, -2], model).traj;
    expectClose(nc[2], [7 / 36, -17 / 9]);
    expectClose(nc[3], [11 / 216, -91 / 54]);
  });

  it('UniC-2 with the σ = 1 point in its history uses the limit ρ₁ = b₁ = 3/2 − 1/ln 3 (4 steps, shift 1)', () => {
    // σ = [1, 3/4, 1/2, 1/4, 0]. UniC at step 2 (order 2; its r = −∞) has h = λ(1/2) − λ(3/4) = ln 3, hφ₁ = B(h) = −2/3,
    // b₁ = (hφ₁/(−h) − 1)/B(h) = 3/2 − 1/ln 3, α = 1/2: x₂ᶜ = (2/3)·x₁ᶜ + (1/3)·m₁ + (b₁/3)·(m₂ − m₁). Step 1's predictor
    // (history at σ = 1 → order-1 update) gave x₂ = (2/3)·x₁ᶜ + (1/3)·m₁, so x₂ᶜ − x₂ = (b₁/3)·(m₂ − m₁), and step 2's
    // predictor carries it forward with σ₃/σ₂ = 1/2: x₃ − x₃(no UniC at step 2) = (b₁/6)·(m₂ − m₁).
    const model = (x: Float32Array, sigma: number): number[] => Array.from(x, (v, j) => 0.5 * v + sigma * (j === 0 ? 1 : -1.5));
    const a = run(uniPC.create(4, 1, noRng), [1, -2], model);
    const b = run(uniPCSampler({ disableCorrector: [1] }).create(4, 1, noRng), [1, -2], model);
    expect(b.traj.slice(0, 3)).toEqual(a.traj.slice(0, 3));
    const b1 = 1.5 - 1 / Math.log(3);
    const m1 = a.traj[1].map((x, j) => x - 0.75 * a.vs[1][j]);
    const m2 = a.traj[2].map((x, j) => x - 0.5 * a.vs[2][j]);
    const diff = a.traj[3].map((x, j) => x - b.traj[3][j]);
    expectClose(
      diff,
      m2.map((m, j) => (b1 / 6) * (m - m1[j])),
      6,
    );
    expect(Math.abs(diff[0])).toBeGreaterThan(1e-3); // the check has teeth
  });

  it('the final step returns the data prediction x − σ_{N−1}·v', () => {
    const state = uniPC.create(5, 3, noRng);
    const model = (x: Float32Array, sigma: number): number[] => Array.from(x, (v, j) => Math.sin(v + j) + sigma);
    const { traj, vs } = run(state, [0.3, -0.7, 1.1], model);
    const sigma = state.sigmas[4];
    expectClose(
      traj[5],
      traj[4].map((x, j) => x - sigma * vs[4][j]),
      6,
    );
  });

  it('recovers x₀ on an exactly straight flow (v = ε − x₀): every state stays on the line (1 − σ)·x₀ + σ·ε', () => {
    const x0 = [0.3, -1.2, 2];
    const eps = [1.5, 0.25, -0.7];
    const v = x0.map((x, j) => eps[j] - x);
    for (const sampler of [uniPC, uniPCSampler({ sigmaMax: WAN_UNIPC_SIGMA_MAX })]) {
      for (const steps of [1, 2, 3, 7, 20]) {
        for (const shift of [1, 3]) {
          const state = sampler.create(steps, shift, noRng);
          const s0 = state.sigmas[0];
          const { traj } = run(
            state,
            x0.map((x, j) => (1 - s0) * x + s0 * eps[j]),
            () => v,
          );
          traj.forEach((x, k) => {
            const s = state.schedule[k];
            expectClose(
              x,
              x0.map((a, j) => (1 - s) * a + s * eps[j]),
              5,
            );
          });
          expectClose(traj[steps], x0, 5);
        }
      }
    }
  });

  it('states are independent: interleaving two requests gives the same trajectories as running them alone', () => {
    const model = (x: Float32Array, sigma: number): Float32Array => Float32Array.from(x, (v, j) => 0.4 * v - Math.tanh(v) + sigma * (j + 1));
    const alone = (start: number[]): number[] => {
      const st = uniPC.create(6, 3, noRng);
      const x = Float32Array.from(start);
      st.sigmas.forEach((s, i) => st.step(x, model(x, s), i));
      return Array.from(x);
    };
    const a = uniPC.create(6, 3, noRng);
    const b = uniPC.create(6, 3, noRng);
    const xa = Float32Array.from([1, -1]);
    const xb = Float32Array.from([-0.5, 2]);
    for (let i = 0; i < 6; i++) {
      a.step(xa, model(xa, a.sigmas[i]), i);
      b.step(xb, model(xb, b.sigmas[i]), i);
    }
    expect(Array.from(xa)).toEqual(alone([1, -1]));
    expect(Array.from(xb)).toEqual(alone([-0.5, 2]));
  });

  it('rejects bad arguments', () => {
    expect(() => uniPC.create(0, 1)).toThrow(RangeError);
    expect(() => uniPC.create(2.5, 1)).toThrow(RangeError);
    expect(() => uniPC.create(4, 0)).toThrow(RangeError);
    expect(() => uniPC.create(4, Number.NaN)).toThrow(RangeError);
    expect(() => uniPC.create(4, Infinity)).toThrow(RangeError);
    expect(() => uniPCSampler({ sigmaMax: 0 })).toThrow(RangeError);
    expect(() => uniPCSampler({ sigmaMax: 1.5 })).toThrow(RangeError);
    expect(() => uniPCSampler({ sigmaMax: Number.NaN })).toThrow(RangeError);
    expect(() => uniPCSampler({ disableCorrector: [-1] })).toThrow(RangeError);
    expect(() => uniPCSampler({ disableCorrector: [0.5] })).toThrow(RangeError);
    expect(() => uniPCSigmas(4, 1, 2)).toThrow(RangeError);

    const state = uniPC.create(2, 1, noRng);
    expect(() => state.step(new Float32Array(2), new Float32Array(2), 1)).toThrow(RangeError); // out of order
    expect(() => state.step(new Float32Array(2), new Float32Array(3), 0)).toThrow(RangeError); // size mismatch
    state.step(new Float32Array(2), new Float32Array(2), 0);
    expect(() => state.step(new Float32Array(3), new Float32Array(3), 1)).toThrow(RangeError); // size changed
    state.step(new Float32Array(2), new Float32Array(2), 1);
    expect(() => state.step(new Float32Array(2), new Float32Array(2), 2)).toThrow(RangeError); // done
  });
});

describe('Euler behind the sampler interface', () => {
  it('matches flowMatchSigmas + eulerStep', () => {
    const state = flowMatchEulerSampler.create(4, 3, noRng);
    expect(Array.from(state.sigmas)).toEqual(Array.from(flowMatchSigmas(4, 3).slice(0, 4)));
    const x = new Float32Array([1, -2]);
    const ref = new Float32Array([1, -2]);
    const sig = flowMatchSigmas(4, 3);
    for (let i = 0; i < 4; i++) {
      const v = new Float32Array([x[0] * 0.5, 1 - i]);
      const vr = new Float32Array([ref[0] * 0.5, 1 - i]);
      state.step(x, v, i);
      eulerStep(ref, vr, sig[i], sig[i + 1]);
    }
    expect(Array.from(x)).toEqual(Array.from(ref));
    expect(() => flowMatchEulerSampler.create(0, 1, noRng)).toThrow(RangeError);
    expect(() => state.step(x, x, 4)).toThrow(RangeError);
  });

  it('at η > 0 each step is stochasticEulerStep, drawing x.length normals per step but none at the last', () => {
    const sig = flowMatchSigmas(3, 3);
    const run = (eta: number) => {
      const rng = new Rng(9);
      let draws = 0;
      const counted = () => {
        draws++;
        return rng.normal();
      };
      const state = flowMatchEulerSampler.create(3, 3, counted, eta);
      const x = new Float32Array([1, -2, 0.5]);
      for (let i = 0; i < 3; i++)
        state.step(
          x,
          Float32Array.from(x, (xi) => xi * 0.5 + i),
          i,
        );
      return { x, draws };
    };
    const ref = new Float32Array([1, -2, 0.5]);
    const rng = new Rng(9);
    for (let i = 0; i < 3; i++)
      stochasticEulerStep(
        ref,
        Float32Array.from(ref, (xi) => xi * 0.5 + i),
        sig[i],
        sig[i + 1],
        0.7,
        () => rng.normal(),
      );
    const stochastic = run(0.7);
    expect(Array.from(stochastic.x)).toEqual(Array.from(ref));
    expect(stochastic.draws).toBe(2 * 3);
    expect(Array.from(run(0.7).x)).toEqual(Array.from(ref)); // the same draws give the same sample
    expect(run(0).draws).toBe(0);
    expect(() => flowMatchEulerSampler.create(3, 3, noRng, 1.5)).toThrow(/eta must lie in \[0, 1\]/);
  });

  it('UniPC and DMD take no η: 0 or absent only', () => {
    expect(() => uniPC.create(4, 3, noRng, 0)).not.toThrow();
    expect(() => uniPC.create(4, 3, noRng, 0.5)).toThrow(/unipc: eta .* Euler option/);
    expect(() => dmdSampler().create(4, 3, noRng, 1)).toThrow(/dmd: eta .* Euler option/);
  });
});
