import { CostModel } from '../../../src/executor/scheduler';
import type { StepCost } from '../../../src/pipeline/step-grants';

const K: StepCost = { model: 'wan', phase: 'denoise', shape: '480x832x21', guidance: 'cfg' };
const OTHER: StepCost = { ...K, guidance: 'none' };

describe('CostModel', () => {
  it('keyOf is a stable model|phase|shape|guidance string that never collides', () => {
    expect(CostModel.keyOf(K)).toBe('wan|denoise|480x832x21|cfg');
    expect(CostModel.keyOf({ model: 'a|b', phase: 'c', shape: 'd', guidance: 'e' })).not.toBe(
      CostModel.keyOf({ model: 'a', phase: 'b|c', shape: 'd', guidance: 'e' }),
    );
    expect(CostModel.keyOf({ model: 'a\\', phase: '|b', shape: 'c', guidance: 'd' })).not.toBe(
      CostModel.keyOf({ model: 'a\\|', phase: 'b', shape: 'c', guidance: 'd' }),
    );
  });

  it('predicts the measured average if any, else the seed, else defaultMs', () => {
    const costs = new CostModel({ defaultMs: 50, seed: { [CostModel.keyOf(K)]: 400 } });
    expect(costs.predict(OTHER)).toBe(50);
    expect(costs.predict(K)).toBe(400);
    costs.observe(K, 300);
    expect(costs.predict(K)).toBe(300);
    expect(costs.predict(OTHER)).toBe(50);
  });

  it('calibrates online: the prediction moves toward the observed values by alpha', () => {
    const costs = new CostModel({ alpha: 0.5 });
    costs.observe(K, 100);
    costs.observe(K, 200);
    expect(costs.predict(K)).toBe(150);
    for (let i = 0; i < 30; i++) costs.observe(K, 40);
    expect(costs.predict(K)).toBeCloseTo(40, 6);
    expect(costs.samples(K)).toBe(32);
    expect(costs.samples(OTHER)).toBe(0);
  });

  it('ignores non-finite and negative measurements', () => {
    const costs = new CostModel({ defaultMs: 10 });
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, -1]) costs.observe(K, bad);
    expect(costs.samples(K)).toBe(0);
    expect(costs.predict(K)).toBe(10);
    costs.observe(K, 0);
    expect(costs.predict(K)).toBe(0);
  });

  it('instances share nothing', () => {
    const a = new CostModel();
    const b = new CostModel();
    a.observe(K, 7);
    expect(b.samples(K)).toBe(0);
    expect(b.predict(K)).toBe(100);
  });

  it('rejects a bad configuration', () => {
    expect(() => new CostModel({ alpha: 0 })).toThrow(RangeError);
    expect(() => new CostModel({ alpha: 1.5 })).toThrow(RangeError);
    expect(() => new CostModel({ defaultMs: -1 })).toThrow(RangeError);
    expect(() => new CostModel({ seed: { x: Number.NaN } })).toThrow(RangeError);
  });
});
