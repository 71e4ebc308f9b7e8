/**
 * The stratified cluster bootstrap's percentile interval on cases whose resampling distribution is known by hand,
 * against the normal approximation on a larger sample, and on bad options.
 */
import { clusterBootstrapInterval } from '../../bench/eval/bootstrap';

/** A cluster of `n` trials with `k` successes; the statistic pools them (successes / trials). */
interface Cluster {
  k: number;
  n: number;
}
const pooled = (s: readonly Cluster[]): number | null => {
  const n = s.reduce((a, c) => a + c.n, 0);
  return n ? s.reduce((a, c) => a + c.k, 0) / n : null;
};

describe('clusterBootstrapInterval', () => {
  it('two clusters: resamples are {A,A}, {A,B}, {B,B} with probabilities 1/4, 1/2, 1/4', () => {
    const a = { k: 0, n: 8 },
      b = { k: 8, n: 8 };
    // pooled ratio 0, 0.5, 1: the 2.5 % and 97.5 % quantiles are the extremes, the 30 % and 70 % ones both 0.5
    expect(clusterBootstrapInterval([[a, b]], pooled)).toEqual([0, 1]);
    expect(clusterBootstrapInterval([[a, b]], pooled, { level: 0.4 })).toEqual([0.5, 0.5]);
  });

  it('pools within a resample: unequal clusters weigh by their trials', () => {
    // {A,A} = 0, {A,B} = 3/4 (6 of 8), {B,B} = 1: the 30 % and 70 % quantiles are both 3/4
    expect(
      clusterBootstrapInterval(
        [
          [
            { k: 0, n: 2 },
            { k: 6, n: 6 },
          ],
        ],
        pooled,
        { level: 0.4 },
      ),
    ).toEqual([0.75, 0.75]);
  });

  it('strata keep their sizes: one unit per stratum is drawn every time', () => {
    const a = { k: 0, n: 1 },
      b = { k: 1, n: 1 };
    expect(clusterBootstrapInterval([[a], [b]], pooled)).toEqual([0.5, 0.5]);
    expect(clusterBootstrapInterval([[a, b]], pooled)).toEqual([0, 1]);
    expect(clusterBootstrapInterval([[a], [], [b]], pooled)).toEqual([0.5, 0.5]);
  });

  it('takes the ⌈B·p⌉-th smallest value: ranks 50 and 1950 of 2000 at 95 %, 100 and 1900 at 90 %', () => {
    const counter = () => {
      let calls = 0;
      return () => ++calls;
    };
    expect(clusterBootstrapInterval([[1]], counter())).toEqual([50, 1950]);
    expect(clusterBootstrapInterval([[1]], counter(), { level: 0.9 })).toEqual([100, 1900]);
    expect(clusterBootstrapInterval([[1]], counter(), { resamples: 1000 })).toEqual([25, 975]);
    expect(clusterBootstrapInterval([[1]], counter(), { resamples: 10 })).toEqual([1, 10]);
  });

  it('identical clusters give a zero-width interval at their value', () => {
    expect(clusterBootstrapInterval([Array.from({ length: 10 }, () => ({ k: 3, n: 4 }))], pooled)).toEqual([0.75, 0.75]);
  });

  it('matches the normal approximation p ± 1.96·√(p(1 − p)/n) for 100 one-trial clusters', () => {
    // p = 0.5, n = 100: 0.5 ± 0.098
    const clusters = Array.from({ length: 100 }, (_, i) => ({ k: i % 2, n: 1 }));
    const [lo, hi] = clusterBootstrapInterval([clusters], pooled, { resamples: 4000 })!;
    expect(Math.abs(lo - 0.402)).toBeLessThan(0.03);
    expect(Math.abs(hi - 0.598)).toBeLessThan(0.03);
  });

  it('counts clusters, not trials: 4 clusters of 25 trials give a far wider interval than 100 clusters of 1 at the same p', () => {
    const [lo4, hi4] = clusterBootstrapInterval(
      [
        [
          { k: 25, n: 25 },
          { k: 0, n: 25 },
          { k: 25, n: 25 },
          { k: 0, n: 25 },
        ],
      ],
      pooled,
    )!;
    const [lo100, hi100] = clusterBootstrapInterval([Array.from({ length: 100 }, (_, i) => ({ k: i % 2, n: 1 }))], pooled)!;
    expect(hi4 - lo4).toBeGreaterThan(0.7);
    expect(hi100 - lo100).toBeLessThan(0.25);
  });

  it('leaves out resamples where the statistic is undefined, and is null when it is undefined on all', () => {
    const empty = { k: 0, n: 0 },
      full = { k: 2, n: 2 };
    expect(clusterBootstrapInterval([[empty, full]], pooled)).toEqual([1, 1]);
    expect(clusterBootstrapInterval([[empty, empty]], pooled)).toBeNull();
  });

  it('is a function of the seed: the same seed repeats the interval', () => {
    const clusters = Array.from({ length: 30 }, (_, i) => ({ k: (i * 7) % 5, n: 4 }));
    const first = clusterBootstrapInterval([clusters], pooled, { seed: 3 });
    expect(clusterBootstrapInterval([clusters], pooled, { seed: 3 })).toEqual(first);
    const seeds = [0, 1, 2, 4, 5].map((seed) => JSON.stringify(clusterBootstrapInterval([clusters], pooled, { seed, resamples: 50 })));
    expect(new Set(seeds).size).toBeGreaterThan(1);
  });

  it('refuses no unit, bad options and a non-finite statistic, naming them', () => {
    expect(() => clusterBootstrapInterval([], pooled)).toThrow(/no unit to resample/);
    expect(() => clusterBootstrapInterval([[], []], pooled)).toThrow(/no unit to resample/);
    for (const resamples of [0, -1, 1.5, NaN])
      expect(() => clusterBootstrapInterval([[{ k: 1, n: 1 }]], pooled, { resamples })).toThrow(/resamples must be a positive integer/);
    for (const level of [0, 1, -0.5, 2, NaN])
      expect(() => clusterBootstrapInterval([[{ k: 1, n: 1 }]], pooled, { level })).toThrow(/level must be in \(0, 1\)/);
    for (const seed of [-1, 1.5, 2 ** 32])
      expect(() => clusterBootstrapInterval([[{ k: 1, n: 1 }]], pooled, { seed })).toThrow(/seed must be an unsigned 32-bit integer/);
    expect(() => clusterBootstrapInterval([[1]], () => NaN)).toThrow(/the statistic returned NaN/);
    expect(() => clusterBootstrapInterval([[1]], () => Infinity)).toThrow(/the statistic returned Infinity/);
  });
});
