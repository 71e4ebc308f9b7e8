import { CFGPolicy } from '../../src/pipeline/policies/cfg';
import { ExpertRouting } from '../../src/pipeline/policies/expert-routing';
import { FlowShiftPolicy } from '../../src/pipeline/policies/flow-shift';
import { SamplerPolicy } from '../../src/pipeline/policies/sampler-policy';
import { OmniError } from '../../src/errors';

const dispatches = (p: CFGPolicy, total: number, scale: number) => Array.from({ length: total }, (_, i) => p.plan(i, total, scale).dispatch);

describe('CFGPolicy', () => {
  it('classic runs two sequential forwards on every step with the request scale', () => {
    const p = CFGPolicy.classic();
    expect(p.slot).toBe('guidance');
    expect(p.variant).toBe('classic');
    expect(dispatches(p, 4, 5)).toEqual(['sequential', 'sequential', 'sequential', 'sequential']);
    expect(p.plan(2, 4, 5)).toEqual({ dispatch: 'sequential', scale: 5 });
    expect(p.needsNegative(5)).toBe(true);
  });

  it('batched runs one stacked forward on every step', () => {
    const p = CFGPolicy.batched();
    expect(dispatches(p, 3, 7.5)).toEqual(['batched', 'batched', 'batched']);
    expect(p.plan(0, 3, 7.5)).toEqual({ dispatch: 'batched', scale: 7.5 });
    expect(p.needsNegative(7.5)).toBe(true);
  });

  it('none runs only the conditional forward and never needs the negative prompt', () => {
    const p = CFGPolicy.none();
    expect(dispatches(p, 3, 6)).toEqual(['single', 'single', 'single']);
    expect(p.plan(1, 3, 6)).toEqual({ dispatch: 'single', scale: 1 });
    expect(p.needsNegative(6)).toBe(false);
  });

  it('scale 1 plans single forwards and needs no negative prompt (classic and batched)', () => {
    for (const p of [CFGPolicy.classic(), CFGPolicy.batched()]) {
      expect(dispatches(p, 3, 1)).toEqual(['single', 'single', 'single']);
      expect(p.plan(0, 3, 1)).toEqual({ dispatch: 'single', scale: 1 });
      expect(p.needsNegative(1)).toBe(false);
    }
    // Scales other than 1 (including 0, the unconditional branch alone) do need it.
    expect(CFGPolicy.classic().needsNegative(0)).toBe(true);
  });

  it('interval gating: [0.25, 0.75) over 4 steps guides steps 1 and 2 only', () => {
    const p = CFGPolicy.classic([0.25, 0.75]);
    expect(dispatches(p, 4, 4)).toEqual(['single', 'sequential', 'sequential', 'single']);
    expect(p.plan(0, 4, 4).scale).toBe(1);
    expect(p.plan(1, 4, 4).scale).toBe(4);
    const b = CFGPolicy.batched([0.25, 0.75]);
    expect(dispatches(b, 4, 4)).toEqual(['single', 'batched', 'batched', 'single']);
  });

  it('interval boundaries: start is inclusive, end exclusive', () => {
    // f = i/N: with N = 10, [0.3, 0.6) covers i = 3, 4, 5.
    const p = CFGPolicy.batched([0.3, 0.6]);
    const on = dispatches(p, 10, 3).flatMap((d, i) => (d === 'single' ? [] : [i]));
    expect(on).toEqual([3, 4, 5]);
    // [0, 0.5) over 6 steps: i = 0, 1, 2.
    expect(dispatches(CFGPolicy.batched([0, 0.5]), 6, 7.5)).toEqual(['batched', 'batched', 'batched', 'single', 'single', 'single']);
    // [0.5, 1] reaches the last step (f < 1 always).
    expect(dispatches(CFGPolicy.classic([0.5, 1]), 4, 2)).toEqual(['single', 'single', 'sequential', 'sequential']);
  });

  it('an empty interval never guides and needs no negative prompt', () => {
    const p = CFGPolicy.classic([0.5, 0.5]);
    expect(dispatches(p, 4, 4)).toEqual(['single', 'single', 'single', 'single']);
    expect(p.needsNegative(4)).toBe(false);
  });

  it("a request's interval passed to plan and needsNegative replaces the policy's (its deployment default)", () => {
    const p = CFGPolicy.classic([0.5, 1]);
    expect(dispatches(p, 4, 3)).toEqual(['single', 'single', 'sequential', 'sequential']);
    const withRequest = (interval: [number, number]) => Array.from({ length: 4 }, (_, i) => p.plan(i, 4, 3, interval).dispatch);
    expect(withRequest([0, 0.5])).toEqual(['sequential', 'sequential', 'single', 'single']);
    expect(withRequest([0, 1])).toEqual(['sequential', 'sequential', 'sequential', 'sequential']);
    // 20 steps at [0, 0.25): steps 0–4 guided (5/20 = 0.25 is outside).
    const on = Array.from({ length: 20 }, (_, i) => p.plan(i, 20, 2, [0, 0.25]).dispatch).flatMap((d, i) => (d === 'single' ? [] : [i]));
    expect(on).toEqual([0, 1, 2, 3, 4]);
    expect(p.plan(0, 4, 3, [0, 0.5])).toEqual({ dispatch: 'sequential', scale: 3 });
    expect(p.needsNegative(3, [0.3, 0.3])).toBe(false);
    expect(p.needsNegative(3, [0, 0.1])).toBe(true);
    // The none variant and scale 1 never guide, whatever the interval.
    expect(CFGPolicy.none().plan(0, 4, 3, [0, 1]).dispatch).toBe('single');
    expect(p.plan(0, 4, 1, [0, 1]).dispatch).toBe('single');
  });

  it('names encode the variant and the interval', () => {
    expect(CFGPolicy.classic().name).toBe('classic-cfg');
    expect(CFGPolicy.batched().name).toBe('batched-cfg');
    expect(CFGPolicy.none().name).toBe('none-cfg');
    expect(CFGPolicy.classic([0.25, 0.75]).name).toBe('classic-cfg[0.25,0.75)');
    expect(CFGPolicy.batched([0, 0.5]).guidanceKey).toBe('batched-cfg[0,0.5)');
  });

  it('rejects bad intervals', () => {
    expect(() => CFGPolicy.classic([-0.1, 0.5])).toThrow(RangeError);
    expect(() => CFGPolicy.classic([0, 1.5])).toThrow(RangeError);
    expect(() => CFGPolicy.batched([0.75, 0.25])).toThrow(/0 ≤ start ≤ end ≤ 1/);
    expect(() => CFGPolicy.batched([Number.NaN, 1])).toThrow(RangeError);
    expect(() => CFGPolicy.classic([0, Number.NaN])).toThrow(RangeError);
  });
});

describe('ExpertRouting', () => {
  it('single always selects its component', () => {
    const r = ExpertRouting.single();
    expect(r.slot).toBe('expert');
    expect(r.components).toEqual(['transformer']);
    expect(r.select(1000)).toBe('transformer');
    expect(r.select(0)).toBe('transformer');
    expect(ExpertRouting.single('dit').components).toEqual(['dit']);
    expect(r.name).toBe('single(transformer)');
  });

  it('boundary selects high at t ≥ boundary·1000 and low below', () => {
    const r = ExpertRouting.boundary('transformer', 'transformer_2', 0.875);
    expect(r.components).toEqual(['transformer', 'transformer_2']);
    expect(r.select(1000)).toBe('transformer');
    expect(r.select(875)).toBe('transformer');
    expect(r.select(874.999)).toBe('transformer_2');
    expect(r.select(0)).toBe('transformer_2');
    expect(r.name).toBe('boundary(transformer→transformer_2@0.875)');
  });

  it('boundary 1 runs only the first step (t = 1000) on the high-noise expert', () => {
    const r = ExpertRouting.boundary('hi', 'lo', 1);
    expect(r.select(1000)).toBe('hi');
    expect(r.select(999)).toBe('lo');
  });

  it('rejects a boundary outside (0, 1]', () => {
    expect(() => ExpertRouting.boundary('a', 'b', 0)).toThrow(RangeError);
    expect(() => ExpertRouting.boundary('a', 'b', 1.01)).toThrow(RangeError);
    expect(() => ExpertRouting.boundary('a', 'b', -0.5)).toThrow(RangeError);
    expect(() => ExpertRouting.boundary('a', 'b', Number.NaN)).toThrow(RangeError);
  });
});

describe('FlowShiftPolicy', () => {
  it('fixed uses the model default unless the request sets one', () => {
    const p = FlowShiftPolicy.fixed();
    expect(p.slot).toBe('flow_shift');
    expect(p.name).toBe('fixed-shift');
    expect(p.resolve(undefined, 5, 832, 480)).toBe(5);
    expect(p.resolve(3, 5, 832, 480)).toBe(3);
  });

  it('byResolution takes the first row with maxPixels ≥ w·h (boundaries inclusive)', () => {
    const p = FlowShiftPolicy.byResolution([
      { maxPixels: 256 * 256, shift: 1 },
      { maxPixels: 512 * 512, shift: 3 },
      { maxPixels: 1024 * 1024, shift: 6 },
    ]);
    expect(p.name).toBe('resolution-shift');
    expect(p.resolve(undefined, 5, 16, 16)).toBe(1);
    expect(p.resolve(undefined, 5, 256, 256)).toBe(1);
    expect(p.resolve(undefined, 5, 256, 260)).toBe(3);
    expect(p.resolve(undefined, 5, 512, 512)).toBe(3);
    expect(p.resolve(undefined, 5, 832, 480)).toBe(6);
  });

  it('byResolution uses the last row beyond the table', () => {
    const p = FlowShiftPolicy.byResolution([
      { maxPixels: 100, shift: 2 },
      { maxPixels: 1000, shift: 4 },
    ]);
    expect(p.resolve(undefined, 9, 1920, 1080)).toBe(4);
  });

  it('an explicit shift wins over the table', () => {
    const p = FlowShiftPolicy.byResolution([{ maxPixels: 100, shift: 2 }]);
    expect(p.resolve(7, 9, 8, 8)).toBe(7);
    expect(p.resolve(7, 9, 1000, 1000)).toBe(7);
  });

  it('the table is copied: later edits of the caller array do not change the policy', () => {
    const rows = [{ maxPixels: 100, shift: 2 }];
    const p = FlowShiftPolicy.byResolution(rows);
    rows.push({ maxPixels: 10_000, shift: 8 });
    expect(p.resolve(undefined, 1, 50, 50)).toBe(2);
  });

  it('rejects bad tables', () => {
    expect(() => FlowShiftPolicy.byResolution([])).toThrow(RangeError);
    expect(() =>
      FlowShiftPolicy.byResolution([
        { maxPixels: 1000, shift: 2 },
        { maxPixels: 1000, shift: 3 },
      ]),
    ).toThrow(/increasing maxPixels/);
    expect(() =>
      FlowShiftPolicy.byResolution([
        { maxPixels: 1000, shift: 2 },
        { maxPixels: 500, shift: 3 },
      ]),
    ).toThrow(RangeError);
    expect(() => FlowShiftPolicy.byResolution([{ maxPixels: 1000, shift: 0 }])).toThrow(/positive/);
    expect(() => FlowShiftPolicy.byResolution([{ maxPixels: 1000, shift: -1 }])).toThrow(RangeError);
    expect(() => FlowShiftPolicy.byResolution([{ maxPixels: 1000, shift: Number.NaN }])).toThrow(RangeError);
  });
});

describe('SamplerPolicy η', () => {
  it("Euler runs the request's η, else the model's default, else 0", () => {
    const p = SamplerPolicy.of('euler');
    expect(p.eta(undefined, 0.3, 1)).toBe(0.3);
    expect(p.eta('euler', 0, 1)).toBe(0);
    expect(p.eta(undefined, undefined, 1)).toBe(1);
    expect(p.eta(undefined, undefined, undefined)).toBe(0);
  });

  it("the other samplers run η 0: the model's default does not apply to them and a request's η above 0 is refused naming diffusion.eta", () => {
    expect(SamplerPolicy.of('euler').eta('unipc', undefined, 1)).toBe(0);
    expect(SamplerPolicy.of('dmd').eta(undefined, 0, 1)).toBe(0);
    for (const [deployment, requested] of [
      ['euler', 'unipc'],
      ['dmd', undefined],
    ] as const) {
      let err: unknown;
      try {
        SamplerPolicy.of(deployment).eta(requested, 0.5, undefined);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(OmniError);
      expect(err).toMatchObject({ code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', param: 'diffusion.eta' });
      expect((err as Error).message).toMatch(/eta re-noises the euler sampler's steps; the (unipc|dmd) sampler takes none \(got 0\.5\)/);
    }
  });
});
