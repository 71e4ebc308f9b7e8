import { applyClassifierFreeGuidance, firstNonFinite } from '../../src/pipeline/guidance';
import { eulerStep, flowMatchSigmas } from '../../src/pipeline/samplers/flow-match-euler';

describe('flowMatchSigmas', () => {
  it('without shift is linspace(1, 0, N+1)', () => {
    expect(Array.from(flowMatchSigmas(4, 1))).toEqual([1, 0.75, 0.5, 0.25, 0]);
  });

  it('applies sigma\' = s·σ / (1 + (s − 1)·σ) — hand-computed for s = 3, N = 2 and N = 4', () => {
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
