import { clusterBootstrapInterval } from './bootstrap';
import { worldRatios, type WorldClipTally } from './world-eval';

/** The three target figures of issue 8. */
export const TARGET_FIGURES = ['prompt_color_acc', 'action_follow_acc', 'agent_present_rate'] as const;
export type TargetFigure = (typeof TARGET_FIGURES)[number];

/**
 * The figures the intervals and paired differences bound: the target figures, plus block_count_acc and
 * t2v_motion_rate, which are reported, not targets, and bounded so a comparison of two sets of weights or samplers
 * can catch one that stops drawing the prompt's blocks or stops moving the agent in T2V (the target figures count the
 * room and the agent only, and action following world sessions only).
 */
export const INTERVAL_FIGURES = [...TARGET_FIGURES, 'block_count_acc', 't2v_motion_rate'] as const;
export type IntervalFigure = (typeof INTERVAL_FIGURES)[number];

/**
 * The clips of one prompt (T2V) or one session script (world) at every seed of an evaluation: the unit the intervals
 * resample. A clip's frames fail together (a session that starts without an agent misses it in most of its frames),
 * and so, less strongly, do one prompt's clips at other seeds; the units, not the frames, are the independent samples.
 */
export type WorldEvalUnit = readonly WorldClipTally[];

/**
 * 95 % interval [lo, hi] per interval figure (rounded to 3 decimals); null where the figure is undefined (no action
 * pair; no prompt that names blocks; no T2V frame pair with the agent).
 */
export type WorldIntervals = Record<IntervalFigure, [number, number] | null>;

/** One unit scored for two sets of weights on the same prompts and seeds. */
export interface PairedWorldUnit {
  candidate: WorldEvalUnit;
  baseline: WorldEvalUnit;
}

/**
 * Per interval figure: the candidate's and the baseline's figure on all units, candidate − baseline (null where either
 * is undefined) and the difference's 95 % interval; all rounded to 3 decimals, once.
 */
export type WorldDifference = Record<IntervalFigure, { candidate: number | null; baseline: number | null; diff: number | null; ci95: [number, number] | null }>;

const round3 = (x: number): number => Math.round(x * 1e3) / 1e3;
const round3OrNull = (x: number | null): number | null => (x === null ? null : round3(x));
const rounded = (ci: [number, number] | null): [number, number] | null => ci && [round3(ci[0]), round3(ci[1])];

/**
 * 95 % intervals of the interval figures of an evaluation (the target figures, block_count_acc and t2v_motion_rate), by the stratified
 * cluster bootstrap (bench/eval/bootstrap.ts, 2000 resamples, seed 0, so the same tallies print the same intervals) with
 * the prompt as the unit and the modes (T2V clips, world sessions) as strata, whose sizes the evaluation fixes.
 * @param strata the units of each mode
 * @throws RangeError when there is no unit
 */
export function worldIntervals(strata: readonly (readonly WorldEvalUnit[])[]): WorldIntervals {
  const interval = (k: IntervalFigure) => rounded(clusterBootstrapInterval(strata, (units) => worldRatios(units.flat())[k]));
  return Object.fromEntries(INTERVAL_FIGURES.map((k) => [k, interval(k)])) as WorldIntervals;
}

/**
 * Difference of the interval figures (the target figures, block_count_acc, t2v_motion_rate) between two sets of weights scored on
 * the same prompts and seeds, with the 95 % interval of the paired bootstrap: each resample draws units and takes both
 * sets' clips of them, so the spread between prompts, which both share, cancels (the bootstrap of paired data: Efron &
 * Tibshirani 1993, ch. 6 and 13; units and strata as `worldIntervals`). An interval that excludes 0 tells the two apart
 * on that figure, for these prompts.
 * @param strata the paired units of each mode
 * @throws RangeError when there is no unit
 */
export function worldDifference(strata: readonly (readonly PairedWorldUnit[])[]): WorldDifference {
  const figures = (units: readonly PairedWorldUnit[], k: IntervalFigure) =>
    [worldRatios(units.flatMap((u) => u.candidate))[k], worldRatios(units.flatMap((u) => u.baseline))[k]] as const;
  const diff = (units: readonly PairedWorldUnit[], k: IntervalFigure): number | null => {
    const [a, b] = figures(units, k);
    return a === null || b === null ? null : a - b;
  };
  return Object.fromEntries(
    INTERVAL_FIGURES.map((k) => {
      const ci95 = rounded(clusterBootstrapInterval(strata, (units) => diff(units, k)));
      const [candidate, baseline] = figures(strata.flat(), k);
      const d = candidate === null || baseline === null ? null : candidate - baseline;
      return [k, { candidate: round3OrNull(candidate), baseline: round3OrNull(baseline), diff: round3OrNull(d), ci95 }];
    }),
  ) as WorldDifference;
}

/**
 * Units of one clip each, in order: the units of a one-prompt evaluation (`eval:world --prompt`), where the prompt is
 * fixed and its clips at different seeds are the independent samples. With the prompt as the unit such an evaluation
 * would have a single unit per mode, and every bootstrap resample would draw the same clips (a zero-width interval).
 */
export function clipUnits(units: readonly WorldEvalUnit[]): WorldEvalUnit[] {
  return units.flatMap((u) => u.map((clip) => [clip]));
}

/**
 * Paired units of one clip each, in order (as `clipUnits`, for `worldDifference`): the candidate's i-th clip of a unit
 * with the baseline's i-th, the order `pairWithBaseline` gives both.
 * @throws RangeError when a unit's candidate and baseline hold different numbers of clips
 */
export function pairedClipUnits(units: readonly PairedWorldUnit[]): PairedWorldUnit[] {
  return units.flatMap((u) => {
    if (u.candidate.length !== u.baseline.length)
      throw new RangeError(`pairedClipUnits: a unit holds ${u.candidate.length} candidate clips and ${u.baseline.length} baseline clips`);
    return u.candidate.map((clip, i) => ({ candidate: [clip], baseline: [u.baseline[i]] }));
  });
}
