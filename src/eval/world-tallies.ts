import { z } from 'zod';
import type { WorldClipTally } from './world-eval';
import type { PairedWorldUnit, WorldEvalUnit } from './world-intervals';

const count = z.number().int().nonnegative().max(1e9);

/** One scored clip of an evaluation: which prompt (unit) of which mode, at which seed, and its counts. */
export const WorldTallyRecordSchema = z
  .strictObject({
    mode: z.enum(['t2v', 'world']),
    /** Index of the prompt (T2V) or session script (world) in the evaluation's set. */
    unit: z.number().int().nonnegative().max(1e6),
    seed: z.number().int().nonnegative().max(0xffffffff),
    prompt: z.string().max(1000),
    frames: count,
    colorOk: count,
    roomOk: count,
    present: count,
    pairs: count,
    followed: count,
  })
  .refine((r) => r.colorOk <= r.roomOk && r.roomOk <= r.frames && r.present <= r.frames && r.pairs < Math.max(1, r.frames) && r.followed <= r.pairs, {
    message: 'counts are inconsistent: need colorOk ≤ roomOk ≤ frames, present ≤ frames, pairs < frames, followed ≤ pairs',
  });
export type WorldTallyRecord = z.infer<typeof WorldTallyRecordSchema>;

/**
 * The per-clip tallies of one `eval:world` run (`--tallies-out`), the baseline a later run is compared with
 * (`--baseline`). Versioned so a file of another layout is refused rather than half-read.
 */
export const WorldTalliesFileSchema = z.strictObject({
  format: z.literal('omnirx-world-tallies'),
  version: z.literal(1),
  clips: z.array(WorldTallyRecordSchema).min(1).max(100_000),
});
export type WorldTalliesFile = z.infer<typeof WorldTalliesFileSchema>;

/** The counts of a record (what the intervals resample). */
const tallyOf = (r: WorldTallyRecord): WorldClipTally => ({ frames: r.frames, colorOk: r.colorOk, roomOk: r.roomOk, present: r.present, pairs: r.pairs, followed: r.followed });
const keyOf = (r: WorldTallyRecord): string => `${r.mode} unit ${r.unit} seed ${r.seed}`;

/**
 * Parses a tallies file's text.
 * @param source the file name, for messages
 * @throws Error naming the source and the first offending field as a dotted path (`clips.3.pairs`), for text that is
 *   not JSON, a layout other than `WorldTalliesFileSchema`, or two records of the same mode, unit and seed
 */
export function parseWorldTallies(text: string, source: string): WorldTalliesFile {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new Error(`${source}: not JSON (${(e as Error).message})`);
  }
  const r = WorldTalliesFileSchema.safeParse(json);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new Error(`${source}: ${issue.path.map(String).join('.') || '(root)'}: ${issue.message}`);
  }
  const seen = new Map<string, number>();
  r.data.clips.forEach((c, i) => {
    const k = keyOf(c);
    if (seen.has(k)) throw new Error(`${source}: clips.${i}: ${k} repeats clips.${seen.get(k)}`);
    seen.set(k, i);
  });
  return r.data;
}

/** The records grouped into units (one prompt at every seed), per mode: the strata of `worldIntervals`. */
export function unitsByMode(records: readonly WorldTallyRecord[]): Record<'t2v' | 'world', WorldEvalUnit[]> {
  const out: Record<'t2v' | 'world', WorldClipTally[][]> = { t2v: [], world: [] };
  for (const r of records) (out[r.mode][r.unit] ??= []).push(tallyOf(r));
  return { t2v: out.t2v.filter(Boolean), world: out.world.filter(Boolean) };
}

/**
 * Pairs a candidate's records with a baseline's of the same clips (mode, unit, seed and prompt), per mode.
 * @throws Error naming the first clip of either side that the other lacks, or whose prompt differs: the two runs
 *   must be of the same set (`eval:world` with the same `--seeds`)
 */
export function pairWithBaseline(candidate: readonly WorldTallyRecord[], baseline: readonly WorldTallyRecord[]): Record<'t2v' | 'world', PairedWorldUnit[]> {
  const base = new Map(baseline.map((r) => [keyOf(r), r]));
  const cand = new Set(candidate.map(keyOf));
  for (const r of candidate) {
    const b = base.get(keyOf(r));
    if (b === undefined) throw new Error(`baseline: has no clip ${keyOf(r)} (run it with the same --seeds)`);
    if (b.prompt !== r.prompt) throw new Error(`baseline: clip ${keyOf(r)} has prompt ${JSON.stringify(b.prompt)}, this run ${JSON.stringify(r.prompt)}`);
  }
  const extra = baseline.find((r) => !cand.has(keyOf(r)));
  if (extra !== undefined) throw new Error(`baseline: has clip ${keyOf(extra)}, which this run lacks (run it with the same --seeds)`);
  const pair = (mode: 't2v' | 'world'): PairedWorldUnit[] => {
    const units: PairedWorldUnit[] = [];
    for (const r of candidate.filter((c) => c.mode === mode)) {
      const u = (units[r.unit] ??= { candidate: [], baseline: [] }) as { candidate: WorldClipTally[]; baseline: WorldClipTally[] };
      u.candidate.push(tallyOf(r));
      u.baseline.push(tallyOf(base.get(keyOf(r))!));
    }
    return units.filter(Boolean);
  };
  return { t2v: pair('t2v'), world: pair('world') };
}
