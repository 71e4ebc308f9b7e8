import { applyClassifierFreeGuidance, firstNonFinite } from '../../src/pipeline/guidance';
import { eulerStep, flowMatchSigmas, stochasticEulerStep } from '../../src/pipeline/samplers/flow-match-euler';
import { Rng } from '../../src/util/rng';

describe('flowMatchSigmas', () => {
  it('without shift is linspace(1, 0, N+1)', () => {
    expect(Array.from(flowMatchSigmas(4, 1))).toEqual([1, 0.75, 0.5, 0.25, 0]);
  });

  it("applies sigma' = s·σ / (1 + (s − 1)·σ) — hand-computed for s = 3, N = 2 and N = 4", () => {
    // σ = 0.5: 1.5 / 2 = 0.75
    expect(Array.from(flowMatchSigmas(2, 3))).toEqual([1, 0.75, 0]);
    // σ = 0.75: 2.25/2.5 = 0.9; σ = 0.25: 0.75/1.5 = 0.5
    const s = Array.from(flowMatchSigmas(4, 3));
    expect(s[0]).toBe(1);
    expect(s[1]).toBeCloseTo(0.9, 15);
    expect(s[2]).toBeCloseTo(0.75, 15);
    expect(s[3]).toBeCloseTo(0.5, 15);
    expect(s[4]).toBe(0);
  });

  it('a shift below 1 moves sigmas down (s = 0.5, σ = 0.5 → 1/3)', () => {
    expect(flowMatchSigmas(2, 0.5)[1]).toBeCloseTo(1 / 3, 15);
  });

  it('is strictly decreasing', () => {
    const s = flowMatchSigmas(50, 5);
    for (let i = 1; i < s.length; i++) expect(s[i]).toBeLessThan(s[i - 1]);
  });

  it('rejects bad arguments', () => {
    expect(() => flowMatchSigmas(0, 1)).toThrow(RangeError);
    expect(() => flowMatchSigmas(2.5, 1)).toThrow(RangeError);
    expect(() => flowMatchSigmas(4, 0)).toThrow(RangeError);
    expect(() => flowMatchSigmas(4, Number.NaN)).toThrow(RangeError);
  });
});

describe('eulerStep', () => {
  it('x ← x + (σ_next − σ)·v (hand-computed)', () => {
    const x = new Float32Array([1, -2, 0.5]);
    eulerStep(x, new Float32Array([2, 4, -1]), 0.75, 0.5);
    expect(Array.from(x)).toEqual([0.5, -3, 0.75]);
  });

  it('integrates a straight flow exactly: x₀ is recovered from pure noise when v = ε − x₀', () => {
    const x0 = [0.3, -1.2];
    const eps = [1.5, 0.25];
    const sigmas = flowMatchSigmas(7, 3);
    const x = new Float32Array(eps);
    for (let i = 0; i < 7; i++) eulerStep(x, new Float32Array([eps[0] - x0[0], eps[1] - x0[1]]), sigmas[i], sigmas[i + 1]);
    expect(x[0]).toBeCloseTo(x0[0], 6);
    expect(x[1]).toBeCloseTo(x0[1], 6);
  });

  it('rejects mismatched sizes', () => {
    expect(() => eulerStep(new Float32Array(2), new Float32Array(3), 1, 0)).toThrow(RangeError);
  });
});

describe('stochasticEulerStep', () => {
  /** An rng that returns `values` in order and counts its calls. */
  const scripted = (values: number[]) => {
    const rng = Object.assign(() => values[rng.calls++] ?? Number.NaN, { calls: 0 });
    return rng;
  };

  it('x ← (1 − σ′)·x̂₀ + σ′·(√(1 − η²)·ε̂ + η·ε) — hand-computed at η = 0.6, σ = 0.75 → 0.5', () => {
    // x̂₀ = x − σ·v = [−0.5, −5]; ε̂ = x̂₀ + v = [1.5, −1]; √(1 − 0.36) = 0.8; ε = [0.5, −1]
    // → 0.5·(−0.5) + 0.5·(0.8·1.5 + 0.6·0.5) = 0.5 and 0.5·(−5) + 0.5·(0.8·(−1) + 0.6·(−1)) = −3.2
    const x = new Float32Array([1, -2]);
    const rng = scripted([0.5, -1]);
    stochasticEulerStep(x, new Float32Array([2, 4]), 0.75, 0.5, 0.6, rng);
    expect(x[0]).toBeCloseTo(0.5, 6);
    expect(x[1]).toBeCloseTo(-3.2, 6);
    expect(rng.calls).toBe(2);
  });

  it('η = 1 re-noises x̂₀ with fresh noise alone: (1 − σ′)·x̂₀ + σ′·ε (diffusers stochastic_sampling)', () => {
    const x = new Float32Array([1, -2]);
    stochasticEulerStep(x, new Float32Array([2, 4]), 0.75, 0.5, 1, scripted([0.5, -1]));
    expect(Array.from(x)).toEqual([0, -3]);
  });

  it('η = 0 is eulerStep bit for bit and draws nothing', () => {
    const rng = new Rng(3);
    const x = new Float32Array(64);
    const v = new Float32Array(64);
    rng.fillNormal(x);
    rng.fillNormal(v);
    const euler = Float32Array.from(x);
    eulerStep(euler, v, 0.9, 0.7);
    const draws = scripted([]);
    stochasticEulerStep(x, v, 0.9, 0.7, 0, draws);
    expect(Buffer.from(x.buffer).equals(Buffer.from(euler.buffer))).toBe(true);
    expect(draws.calls).toBe(0);
  });

  it('the last step (σ′ = 0) returns x̂₀ = x − σ·v and draws nothing', () => {
    const x = new Float32Array([1, -2]);
    const draws = scripted([]);
    stochasticEulerStep(x, new Float32Array([2, 4]), 0.25, 0, 0.8, draws);
    expect(Array.from(x)).toEqual([0.5, -3]);
    expect(draws.calls).toBe(0);
  });

  it('keeps the state on the interpolant: with the exact velocity every η ends at x₀', () => {
    const x0 = [0.3, -1.2, 2];
    const sigmas = flowMatchSigmas(6, 3);
    for (const eta of [0.3, 0.8, 1]) {
      const rng = new Rng(11);
      const x = Float32Array.from([1.5, 0.25, -0.7]);
      for (let i = 0; i < 6; i++) {
        // the model that knows x₀: v = (x − x₀)/σ, so x̂₀ = x₀ whatever noise the state holds
        const v = Float32Array.from(x, (xi, j) => (xi - x0[j]) / sigmas[i]);
        stochasticEulerStep(x, v, sigmas[i], sigmas[i + 1], eta, () => rng.normal());
      }
      x0.forEach((want, j) => expect(x[j]).toBeCloseTo(want, 5));
    }
  });

  it('keeps the noise level σ′ whatever η: x = σ·ε with x̂₀ = 0 steps to a state of standard deviation σ′', () => {
    const n = 40_000;
    for (const eta of [0, 0.5, 1]) {
      const rng = new Rng(5);
      const x = new Float32Array(n);
      rng.fillNormal(x, 0.8);
      const v = Float32Array.from(x, (xi) => xi / 0.8); // v = ε − x̂₀ with x̂₀ = 0
      stochasticEulerStep(x, v, 0.8, 0.4, eta, () => rng.normal());
      const std = Math.sqrt(x.reduce((a, b) => a + b * b, 0) / n);
      expect(std).toBeGreaterThan(0.4 * 0.98);
      expect(std).toBeLessThan(0.4 * 1.02);
    }
  });

  it('rejects η outside [0, 1], mismatched sizes and a non-finite draw', () => {
    const x = new Float32Array(2);
    const v = new Float32Array(2);
    for (const eta of [-0.1, 1.5, Number.NaN]) expect(() => stochasticEulerStep(x, v, 1, 0.5, eta, () => 0)).toThrow(/eta must lie in \[0, 1\]/);
    expect(() => stochasticEulerStep(x, new Float32Array(3), 1, 0.5, 0.5, () => 0)).toThrow(RangeError);
    expect(() => stochasticEulerStep(x, v, 1, 0.5, 0.5, () => Number.POSITIVE_INFINITY)).toThrow(/non-finite/);
  });
});

describe('classifier-free guidance', () => {
  it('v = v_u + g·(v_c − v_u) (hand-computed)', () => {
    const cond = new Float32Array([1, 2]);
    applyClassifierFreeGuidance(cond, new Float32Array([0, 4]), 5);
    expect(Array.from(cond)).toEqual([5, -6]);
  });

  it('scale 1 returns the conditional prediction; scale 0 the unconditional one', () => {
    const a = new Float32Array([1, 2]);
    applyClassifierFreeGuidance(a, new Float32Array([3, 5]), 1);
    expect(Array.from(a)).toEqual([1, 2]);
    const b = new Float32Array([1, 2]);
    applyClassifierFreeGuidance(b, new Float32Array([3, 5]), 0);
    expect(Array.from(b)).toEqual([3, 5]);
  });

  it('finds the first non-finite value', () => {
    expect(firstNonFinite(new Float32Array([0, 1, 2]))).toBe(-1);
    expect(firstNonFinite(new Float32Array([0, Number.NaN, Infinity]))).toBe(1);
    expect(firstNonFinite(new Float32Array([0, 1, -Infinity]))).toBe(2);
  });
});
