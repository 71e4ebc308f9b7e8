import { Rng } from '../util/rng';

/** Options of `clusterBootstrapInterval`. */
export interface BootstrapOptions {
  /** Bootstrap resamples (default 2000). */
  resamples?: number;
  /** Coverage of the interval in (0, 1) (default 0.95). */
  level?: number;
  /** Seed of the resampling (default 0), so an evaluation prints the same interval every run. */
  seed?: number;
}

/**
 * Percentile interval of a statistic under the cluster bootstrap: each resample draws as many clusters as there are,
 * uniformly with replacement, and the statistic is recomputed on it; the interval is the (1 − level)/2 and
 * (1 + level)/2 quantiles (inverse empirical CDF) of those values (Efron & Tibshirani, "An Introduction to the
 * Bootstrap", 1993, ch. 13; resampling whole clusters for dependent observations: Davison & Hinkley, "Bootstrap
 * Methods and their Application", 1997, §3.8). Clusters are the independent units — for the world evaluation the
 * clips, since the frames of one clip succeed or fail together — so the interval is wider, and more honest, than a
 * binomial one over frames.
 *
 * Resamples where the statistic is undefined (null, e.g. a ratio with no denominator) are left out.
 *
 * @param clusters the independent units (at least one)
 * @param statistic the figure of a sample of clusters, or null where undefined
 * @returns [lo, hi], or null when the statistic is undefined on every resample
 * @throws RangeError when `clusters` is empty, `resamples` is not a positive integer or `level` is not in (0, 1)
 */
export function clusterBootstrapInterval<T>(
  clusters: readonly T[],
  statistic: (sample: readonly T[]) => number | null,
  o: BootstrapOptions = {},
): [number, number] | null {
  const resamples = o.resamples ?? 2000;
  const level = o.level ?? 0.95;
  if (clusters.length === 0) throw new RangeError('clusterBootstrapInterval: clusters is empty');
  if (!Number.isInteger(resamples) || resamples < 1) throw new RangeError(`clusterBootstrapInterval: resamples must be a positive integer; got ${resamples}`);
  if (!(level > 0 && level < 1)) throw new RangeError(`clusterBootstrapInterval: level must be in (0, 1); got ${level}`);
  const rng = new Rng(o.seed ?? 0);
  const n = clusters.length;
  const values: number[] = [];
  const sample: T[] = new Array(n);
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < n; i++) sample[i] = clusters[Math.floor(rng.uniform() * n)];
    const v = statistic(sample);
    if (v !== null) values.push(v);
  }
  if (values.length === 0) return null;
  values.sort((a, b) => a - b);
  const quantile = (p: number): number => values[Math.min(values.length - 1, Math.max(0, Math.ceil(p * values.length) - 1))];
  return [quantile((1 - level) / 2), quantile((1 + level) / 2)];
}
