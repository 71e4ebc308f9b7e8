import { clusterBootstrapInterval } from './bootstrap';
import { worldRatios, type WorldClipTally } from './world-eval';

/** The three target figures of issue 8, the ones the intervals bound. */
export const TARGET_FIGURES = ['prompt_color_acc', 'action_follow_acc', 'agent_present_rate'] as const;
export type TargetFigure = (typeof TARGET_FIGURES)[number];

/**
 * The clips of one prompt (T2V) or one session script (world) at every seed of an evaluation: the unit the intervals
 * resample. A clip's frames fail together (a session that starts without an agent misses it in most of its frames),
 * and so, less strongly, do one prompt's clips at other seeds; the units, not the frames, are the independent samples.
 */
export type WorldEvalUnit = readonly WorldClipTally[];

/** 95 % interval [lo, hi] per target figure (rounded to 3 decimals); null where the figure is undefined (no action pair). */
export type WorldIntervals = Record<TargetFigure, [number, number] | null>;

/** One unit scored for two sets of weights on the same prompts and seeds. */
export interface PairedWorldUnit {
  candidate: WorldEvalUnit;
  baseline: WorldEvalUnit;
}

/**
 * Per target figure: the candidate's and the baseline's figure on all units, candidate − baseline (null where either is
 * undefined) and the difference's 95 % interval; all rounded to 3 decimals, once.
 */
export type WorldDifference = Record<TargetFigure, { candidate: number | null; baseline: number | null; diff: number | null; ci95: [number, number] | null }>;

const round3 = (x: number): number => Math.round(x * 1e3) / 1e3;
const round3OrNull = (x: number | null): number | null => (x === null ? null : round3(x));
const rounded = (ci: [number, number] | null): [number, number] | null => ci && [round3(ci[0]), round3(ci[1])];

/**
 * 95 % intervals of the target figures of an evaluation, by the stratified cluster bootstrap (src/eval/bootstrap.ts,
 * 2000 resamples, seed 0, so the same tallies print the same intervals) with the prompt as the unit and the modes
 * (T2V clips, world sessions) as strata, whose sizes the evaluation fixes.
 * @param strata the units of each mode
 * @throws RangeError when there is no unit
 */
export function worldIntervals(strata: readonly (readonly WorldEvalUnit[])[]): WorldIntervals {
  const interval = (k: TargetFigure) => rounded(clusterBootstrapInterval(strata, (units) => worldRatios(units.flat())[k]));
  return Object.fromEntries(TARGET_FIGURES.map((k) => [k, interval(k)])) as WorldIntervals;
}

/**
 * Difference of the target figures between two sets of weights scored on the same prompts and seeds, with the 95 %
 * interval of the paired bootstrap: each resample draws units and takes both sets' clips of them, so the spread between
 * prompts, which both share, cancels (the bootstrap of paired data: Efron & Tibshirani 1993, ch. 6 and 13; units and
 * strata as `worldIntervals`). An interval that excludes 0 tells the two apart on that figure, for these prompts.
 * @param strata the paired units of each mode
 * @throws RangeError when there is no unit
 */
export function worldDifference(strata: readonly (readonly PairedWorldUnit[])[]): WorldDifference {
  const figures = (units: readonly PairedWorldUnit[], k: TargetFigure) => [worldRatios(units.flatMap((u) => u.candidate))[k], worldRatios(units.flatMap((u) => u.baseline))[k]] as const;
  const diff = (units: readonly PairedWorldUnit[], k: TargetFigure): number | null => {
    const [a, b] = figures(units, k);
    return a === null || b === null ? null : a - b;
  };
  return Object.fromEntries(
    TARGET_FIGURES.map((k) => {
      const ci95 = rounded(clusterBootstrapInterval(strata, (units) => diff(units, k)));
      const [candidate, baseline] = figures(strata.flat(), k);
      const d = candidate === null || baseline === null ? null : candidate - baseline;
      return [k, { candidate: round3OrNull(candidate), baseline: round3OrNull(baseline), diff: round3OrNull(d), ci95 }];
    }),
  ) as WorldDifference;
}
