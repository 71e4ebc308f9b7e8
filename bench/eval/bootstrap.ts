import { Rng } from '../../src/util/rng';

/** Options of `clusterBootstrapInterval`. */
export interface BootstrapOptions {
  /** Bootstrap resamples (default 2000). */
  resamples?: number;
  /** Coverage of the interval in (0, 1) (default 0.95). */
  level?: number;
  /** Seed of the resampling, an unsigned 32-bit integer (default 0), so an evaluation prints the same interval every run. */
  seed?: number;
}

/**
 * Percentile interval of a statistic under the stratified cluster bootstrap. Each resample draws, within every
 * stratum, as many units as the stratum has, uniformly with replacement, and recomputes the statistic on all the
 * drawn units together; the interval is the (1 − level)/2 and (1 + level)/2 quantiles of those values, the
 * ⌈B·p⌉-th smallest of the B values where the statistic is defined (the percentile interval, Efron & Tibshirani, "An Introduction to the Bootstrap",
 * 1993, ch. 13). Units are the independent samples, resampled whole, with all the observations they hold (Davison &
 * Hinkley, "Bootstrap Methods and their Application", 1997, §3.8); strata are parts of a design whose sizes are fixed,
 * resampled separately (ibid. §3.2). For the world evaluation a unit is one prompt with its clips at every seed, and the
 * strata are the T2V clips and the world sessions.
 *
 * Resamples where the statistic is undefined (null, e.g. a ratio with no denominator) are left out. `statistic` gets a
 * fresh array each resample.
 *
 * @param strata the units of each stratum (at least one unit in all; empty strata are skipped)
 * @param statistic the figure of a sample of units, or null where undefined
 * @returns [lo, hi], or null when the statistic is undefined on every resample
 * @throws RangeError when there is no unit, `resamples` is not a positive integer, `level` is not in (0, 1), `seed`
 *   is not an unsigned 32-bit integer, or `statistic` returns a value that is neither null nor finite
 */
export function clusterBootstrapInterval<T>(
  strata: readonly (readonly T[])[],
  statistic: (sample: readonly T[]) => number | null,
  o: BootstrapOptions = {},
): [number, number] | null {
  const resamples = o.resamples ?? 2000;
  const level = o.level ?? 0.95;
  if (!strata.some((s) => s.length > 0)) throw new RangeError('clusterBootstrapInterval: no unit to resample');
  if (!Number.isInteger(resamples) || resamples < 1) throw new RangeError(`clusterBootstrapInterval: resamples must be a positive integer; got ${resamples}`);
  if (!(level > 0 && level < 1)) throw new RangeError(`clusterBootstrapInterval: level must be in (0, 1); got ${level}`);
  const seed = o.seed ?? 0;
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff)
    throw new RangeError(`clusterBootstrapInterval: seed must be an unsigned 32-bit integer; got ${seed}`);
  const rng = new Rng(seed);
  const values: number[] = [];
  for (let r = 0; r < resamples; r++) {
    const sample: T[] = [];
    for (const units of strata) for (let i = 0; i < units.length; i++) sample.push(units[Math.floor(rng.uniform() * units.length)]);
    const v = statistic(sample);
    if (v === null) continue;
    if (!Number.isFinite(v)) throw new RangeError(`clusterBootstrapInterval: the statistic returned ${v}; expected a finite number or null`);
    values.push(v);
  }
  if (values.length === 0) return null;
  values.sort((a, b) => a - b);
  // rank ⌈B·p⌉ in integer arithmetic where B·p is one (B·0.025 is 50.00000000000004 in floating point for B = 2000)
  const quantile = (p: number): number => {
    const exact = values.length * p;
    const rank = Math.abs(exact - Math.round(exact)) < 1e-9 ? Math.round(exact) : Math.ceil(exact);
    return values[Math.min(values.length, Math.max(1, rank)) - 1];
  };
  return [quantile((1 - level) / 2), quantile((1 + level) / 2)];
}
