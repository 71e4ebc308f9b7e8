import { readFileSync, statSync } from 'node:fs';
import { z } from 'zod';
import { worldFigures, WorldClipSettingsSchema, type WorldClipSettings, type WorldClipTally, type WorldEvalResult } from './world-eval';
import { parseWorldPrompt } from './world-palette';
import type { PairedWorldUnit, WorldEvalUnit } from './world-intervals';

/** A count: the bound before `.int()`, so a huge value (1e300) is refused by the file's own limit rather than JS's safe-integer one. */
const count = z.number().nonnegative().max(1e9).int();

/**
 * Whether a clip's `blockFrames` is what `tallyWorldClip` counts for its prompt: every frame when the prompt names
 * blocks, none when it names none. A prompt outside the grammar is not judged here (such a clip cannot pair with a
 * run's, which never has one).
 */
function blockFramesFit(r: { prompt: string; frames: number; blockFrames: number }): boolean {
  const scene = parseWorldPrompt(r.prompt);
  return scene === undefined || r.blockFrames === (scene.obstacleCount === undefined ? 0 : r.frames);
}

/** One scored clip of an evaluation: which prompt (unit) of which mode, at which seed, its counts and its settings. */
export const WorldTallyRecordSchema = z
  .strictObject({
    mode: z.enum(['t2v', 'world']),
    /** Index of the prompt (T2V) or session script (world) in the evaluation's set. */
    unit: z.number().nonnegative().max(1e6).int(),
    seed: z.number().nonnegative().max(0xffffffff).int(),
    prompt: z.string().max(1000),
    frames: count.min(1),
    colorOk: count,
    roomOk: count,
    blockFrames: count,
    blockOk: count,
    present: count,
    pairs: count,
    followed: count,
    /** T2V motion counts (`tallyWorldClip`); absent from files written before 2026-12-07's evening: read as none. */
    motionPairs: count.default(0),
    moved: count.default(0),
    settings: WorldClipSettingsSchema,
  })
  .refine(
    (r) =>
      r.colorOk <= r.roomOk &&
      r.roomOk <= r.frames &&
      r.blockOk <= r.blockFrames &&
      r.blockFrames <= r.frames &&
      r.present <= r.frames &&
      r.pairs <= Math.max(0, r.present - 1) &&
      r.followed <= r.pairs &&
      r.motionPairs <= Math.max(0, r.present - 1) &&
      r.moved <= r.motionPairs,
    {
      message:
        'counts are inconsistent: need colorOk ≤ roomOk ≤ frames, blockOk ≤ blockFrames ≤ frames, present ≤ frames, pairs and motionPairs ≤ present − 1 (a pair has the agent in both frames), followed ≤ pairs, moved ≤ motionPairs',
    },
  )
  .refine((r) => r.mode === 'world' || r.pairs === 0, { message: 'a t2v clip has no action pairs', path: ['pairs'] })
  .refine((r) => r.mode === 't2v' || r.motionPairs === 0, { message: 'a world clip has no T2V motion pairs', path: ['motionPairs'] })
  .refine(blockFramesFit, {
    path: ['blockFrames'],
    error: (issue) => {
      const r = issue.input as { prompt: string; frames: number; blockFrames: number };
      return `${r.blockFrames} block frames for ${r.frames} frames of "${r.prompt}": a prompt that names blocks has every frame scored on them (blockFrames = frames), one that names none has 0`;
    },
  });
export type WorldTallyRecord = z.infer<typeof WorldTallyRecordSchema>;

/**
 * The per-clip tallies of one `eval:world` run (`--tallies-out`), the baseline a later run is compared with
 * (`--baseline`). Versioned so a file of another layout is refused rather than half-read; `parseWorldTallies` refuses
 * the earlier versions, saying why:
 *  - version 4 (since 2026-12-04), this one: adds each clip's block counts (`blockFrames`, `blockOk`), behind
 *    block_count_acc;
 *  - version 3 (since 2026-12-02): counts followed actions by the detector's geometric blocked-move rule
 *    (`moveBlocked`), as version 4 does, but has no block counts, so a run cannot be compared with it on
 *    block_count_acc;
 *  - versions 1 and 2 counted followed actions by an earlier rule, so their counts are not comparable.
 */
export const WorldTalliesFileSchema = z.strictObject({
  format: z.literal('omnirx-world-tallies'),
  version: z.literal(4),
  clips: z.array(WorldTallyRecordSchema).min(1).max(100_000),
});
export type WorldTalliesFile = z.infer<typeof WorldTalliesFileSchema>;

/** Largest tallies file read (bytes): 100 000 records of about 480 bytes (230 of counts, 250 of settings). */
export const MAX_TALLIES_BYTES = 64 * 2 ** 20;

/** A tallies file of `records`, as `eval:world --tallies-out` writes it. */
export function worldTalliesFile(records: readonly WorldTallyRecord[]): WorldTalliesFile {
  return { format: 'omnirx-world-tallies', version: 4, clips: [...records] };
}

/** The counts of a record (what the intervals resample). */
const tallyOf = ({ mode: _mode, unit: _unit, seed: _seed, prompt: _prompt, settings: _settings, ...counts }: WorldTallyRecord): WorldClipTally => counts;
const keyOf = (r: Pick<WorldTallyRecord, 'mode' | 'unit' | 'seed'>): string => `${r.mode} unit ${r.unit} seed ${r.seed}`;

/**
 * Parses a tallies file's text.
 * @param source the file name, for messages
 * @throws Error naming the source and the first offending field as a dotted path (`clips.3.pairs`; a record's counts
 *   that do not fit together, or a record that repeats another's mode, unit and seed: the record, `clips.3`), for text
 *   that is not JSON or not of `WorldTalliesFileSchema`'s layout; naming the version and why, for a file of an
 *   earlier version (1–3)
 */
export function parseWorldTallies(text: string, source: string): WorldTalliesFile {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new Error(`${source}: not JSON (${(e as Error).message})`, { cause: e });
  }
  const old =
    json !== null && typeof json === 'object' && (json as { format?: unknown }).format === 'omnirx-world-tallies'
      ? (json as { version?: unknown }).version
      : undefined;
  if (old === 1 || old === 2) {
    throw new Error(
      `${source}: version: ${old} counts followed actions by the detector's blocked-move rule before 2026-12-02; re-run that evaluation to write version 4`,
    );
  }
  if (old === 3) {
    throw new Error(`${source}: version: 3 has no block counts (block_count_acc, since 2026-12-04); re-run that evaluation to write version 4`);
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

/**
 * Reads and parses a tallies file.
 * @throws Error naming the file when it cannot be read, is not a regular file, is larger than MAX_TALLIES_BYTES, or
 *   fails `parseWorldTallies`
 */
export function readWorldTallies(file: string): WorldTalliesFile {
  let text: string;
  try {
    const st = statSync(file);
    if (!st.isFile() && !st.isDirectory()) throw new Error(`${file}: not a regular file (a device or pipe is not a tallies file)`);
    const bytes = st.size;
    if (bytes > MAX_TALLIES_BYTES) throw new Error(`${file}: ${bytes} bytes, more than a tallies file's ${MAX_TALLIES_BYTES}`);
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw code ? new Error(`${file}: cannot read (${code})`) : e;
  }
  return parseWorldTallies(text, file);
}

/** Records grouped by mode, then by unit in order of first appearance: each group holds `pick` of its records. */
function groupUnits<U>(records: readonly WorldTallyRecord[], pick: (rs: WorldTallyRecord[]) => U): Record<'t2v' | 'world', U[]> {
  const groups = { t2v: new Map<number, WorldTallyRecord[]>(), world: new Map<number, WorldTallyRecord[]>() };
  for (const r of records) {
    const g = groups[r.mode].get(r.unit);
    if (g) g.push(r);
    else groups[r.mode].set(r.unit, [r]);
  }
  return { t2v: [...groups.t2v.values()].map(pick), world: [...groups.world.values()].map(pick) };
}

/** One prompt's figures over its clips at every seed (`eval:world --per-prompt`). */
export interface PromptFigures extends WorldEvalResult {
  mode: 't2v' | 'world';
  prompt: string;
  /** Clips (seeds) the figures are over. */
  clips: number;
}

/**
 * The figures of each unit (one prompt of a mode at every seed), T2V units first, each mode's in order of first
 * appearance: which prompts a set's figures are lost on.
 */
export function figuresByPrompt(records: readonly WorldTallyRecord[]): PromptFigures[] {
  const units = groupUnits(records, (rs) => ({ mode: rs[0].mode, prompt: rs[0].prompt, clips: rs.length, ...worldFigures(rs.map(tallyOf)) }));
  return [...units.t2v, ...units.world];
}

/**
 * The records split by whether their prompt names blocks ("… with two yellow blocks"), i.e. whether the clip was scored
 * on blocks (`blockFrames` > 0: `tallyWorldClip` scores every frame of such a prompt, none of another, and the schema
 * holds records to it), each part in the records' order. `eval:world` reports its figures on each part, as T2V loses
 * the agent mostly in prompts that name blocks (docs/model-card.md, "Prompts that name blocks").
 */
export function splitByBlocks(records: readonly WorldTallyRecord[]): { withoutBlocks: WorldTallyRecord[]; withBlocks: WorldTallyRecord[] } {
  return { withoutBlocks: records.filter((r) => r.blockFrames === 0), withBlocks: records.filter((r) => r.blockFrames > 0) };
}

/** The records grouped into units (one prompt at every seed), per mode: the strata of `worldIntervals`. */
export function unitsByMode(records: readonly WorldTallyRecord[]): Record<'t2v' | 'world', WorldEvalUnit[]> {
  return groupUnits(records, (rs) => rs.map(tallyOf));
}

/**
 * Pairs a candidate's records with a baseline's of the same clips (mode, unit, seed, prompt, frame count and, unless
 * `sameSettings` is false, settings), per mode. The baseline may hold more clips (a run at more seeds); only the
 * candidate's are compared. `sameSettings` false pairs two sampler settings of the same clips (e.g. two guidance
 * scales of one set of weights).
 * @throws Error naming the first clip of the candidate that the baseline lacks, or whose prompt, frame count or a
 *   checked setting differs (the setting named)
 */
export function pairWithBaseline(
  candidate: readonly WorldTallyRecord[],
  baseline: readonly WorldTallyRecord[],
  sameSettings = true,
): Record<'t2v' | 'world', PairedWorldUnit[]> {
  checkSameClips(candidate, baseline, sameSettings);
  const base = new Map(baseline.map((r) => [keyOf(r), r]));
  return groupUnits(candidate, (rs) => ({ candidate: rs.map(tallyOf), baseline: rs.map((r) => tallyOf(base.get(keyOf(r))!)) }));
}

/**
 * The settings (in sorted key order) whose values differ between two clips' settings, a missing one included, as
 * "key BASE, this run RUN" joined by "; "; undefined when they agree.
 */
export function settingDifference(run: WorldClipSettings, base: WorldClipSettings): string | undefined {
  const own = (o: WorldClipSettings, k: string) => (Object.hasOwn(o, k) ? o[k] : undefined);
  const show = (v: WorldClipSettings[string] | undefined) => (v === undefined ? 'none' : JSON.stringify(v));
  const keys = [...new Set([...Object.keys(run), ...Object.keys(base)])].sort().filter((k) => own(run, k) !== own(base, k));
  return keys.length ? keys.map((k) => `${k} ${show(own(base, k))}, this run ${show(own(run, k))}`).join('; ') : undefined;
}

/** A baseline's clip ran with other sampler settings than the run's (what `sameSettings` false lets pass). */
export class SettingsMismatchError extends Error {
  override readonly name = 'SettingsMismatchError';
}

/**
 * Checks that a baseline holds every clip of a run: the same (mode, unit, seed) keys, prompts and frame counts (it may
 * hold more), and, unless `sameSettings` is false, the same settings where the run's record carries them. `eval:world`
 * calls it with the planned clips (frame counts and settings left out) before generating any, and again as each clip
 * is scored.
 * @throws SettingsMismatchError when only a setting differs; Error otherwise, as `pairWithBaseline` (a missing clip with
 *   a hint: fewer seeds, or other prompts)
 */
export function checkSameClips(
  run: ReadonlyArray<Pick<WorldTallyRecord, 'mode' | 'unit' | 'seed' | 'prompt'> & { frames?: number; settings?: WorldClipSettings }>,
  baseline: readonly WorldTallyRecord[],
  sameSettings = true,
): void {
  const base = new Map(baseline.map((r) => [keyOf(r), r]));
  for (const r of run) {
    const b = base.get(keyOf(r));
    if (b === undefined) throw new Error(`baseline: has no clip ${keyOf(r)} (${missingHint(r, baseline)})`);
    if (b.prompt !== r.prompt) throw new Error(`baseline: clip ${keyOf(r)} has prompt ${JSON.stringify(b.prompt)}, this run ${JSON.stringify(r.prompt)}`);
    if (r.frames !== undefined && b.frames !== r.frames) throw new Error(`baseline: clip ${keyOf(r)} has ${b.frames} frames, this run ${r.frames}`);
    const differs = sameSettings && r.settings && settingDifference(r.settings, b.settings);
    if (differs) throw new SettingsMismatchError(`baseline: clip ${keyOf(r)} ran with ${differs} (compare runs of the same sampler settings)`);
  }
}

/**
 * Why a baseline lacks a run's clip, as a hint: it holds the clip's prompt at other seeds (a run of fewer `--seeds`),
 * another prompt in its place (a run of another prompt set or `--prompt`), or nothing in its place (fewer prompts).
 */
function missingHint(r: Pick<WorldTallyRecord, 'mode' | 'unit' | 'prompt'>, baseline: readonly WorldTallyRecord[]): string {
  const same = baseline.filter((b) => b.mode === r.mode && b.unit === r.unit);
  if (same.some((b) => b.prompt === r.prompt)) return 'run it with at least as many --seeds';
  if (same.length > 0) return `it has prompt ${JSON.stringify(same[0].prompt)} there: a run of another --prompt-set or --prompt`;
  return 'it holds fewer prompts: a run of another --prompt-set or --prompt';
}

/** The baseline's record of a run's clip (same mode, unit and seed), if it holds one. */
export function baselineRecord(run: Pick<WorldTallyRecord, 'mode' | 'unit' | 'seed'>, baseline: readonly WorldTallyRecord[]): WorldTallyRecord | undefined {
  return baseline.find((b) => keyOf(b) === keyOf(run));
}
