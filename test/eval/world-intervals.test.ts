/**
 * Intervals and paired differences of the world evaluation's target figures and block_count_acc
 * (bench/eval/world-intervals.ts) on hand-made
 * per-clip counts whose resampling distribution is known, and the tallies file that carries a run's counts to a later
 * comparison (bench/eval/world-tallies.ts), with hostile files.
 */
import { worldFigures, type WorldClipTally } from '../../bench/eval/world-eval';
import { clipUnits, pairedClipUnits, worldDifference, worldIntervals, type PairedWorldUnit } from '../../bench/eval/world-intervals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  MAX_TALLIES_BYTES,
  SettingsMismatchError,
  baselineRecord,
  figuresByPrompt,
  pairWithBaseline,
  parseWorldTallies,
  readWorldTallies,
  settingDifference,
  splitByBlocks,
  unitsByMode,
  worldTalliesFile,
  type WorldTallyRecord,
} from '../../bench/eval/world-tallies';

/**
 * A 24-frame clip with `colorOk` prompt-colour frames, `present` agent frames and `followed` of `pairs` action pairs,
 * whose prompt names no blocks.
 */
const clip = (colorOk: number, present = 24, pairs = 0, followed = 0): WorldClipTally => ({
  frames: 24,
  colorOk,
  roomOk: 24,
  blockFrames: 0,
  blockOk: 0,
  present,
  pairs,
  followed,
  motionPairs: 0,
  moved: 0,
});
/** A T2V clip whose agent moved in `moved` of its 23 frame pairs (all present). */
const moving = (moved: number): WorldClipTally => ({ ...clip(24), motionPairs: 23, moved });
/** A clip whose prompt names blocks, with the blocks counted right in `blockOk` of its frames. */
const withBlocks = (t: WorldClipTally, blockOk: number): WorldClipTally => ({ ...t, blockFrames: t.frames, blockOk });

describe('worldIntervals', () => {
  it('perfect clips: every interval is [1, 1]; without pairs, the action interval is null', () => {
    const units = Array.from({ length: 8 }, () => [clip(24, 24, 20, 20)]);
    expect(worldIntervals([units])).toEqual({
      prompt_color_acc: [1, 1],
      action_follow_acc: [1, 1],
      agent_present_rate: [1, 1],
      block_count_acc: null,
      t2v_motion_rate: null,
    });
    expect(worldIntervals([Array.from({ length: 8 }, () => [clip(24)])]).action_follow_acc).toBeNull();
  });

  it('block_count_acc: bounded like the target figures, over the clips whose prompt names blocks; null where none does', () => {
    expect(worldIntervals([Array.from({ length: 8 }, () => [withBlocks(clip(24), 24)])]).block_count_acc).toEqual([1, 1]);
    // 6 prompts × 4 seeds, every other prompt draws the wrong number of blocks in every frame: as prompt_color_acc above
    const units = Array.from({ length: 6 }, (_, i) => Array.from({ length: 4 }, () => withBlocks(clip(24), i % 2 ? 24 : 0)));
    expect(worldIntervals([units]).block_count_acc).toEqual([0.167, 0.833]);
    // prompts without blocks neither help nor hurt (a resample of none of the block prompts is left out)
    const mixed = [...Array.from({ length: 4 }, () => [withBlocks(clip(24), 24)]), ...Array.from({ length: 4 }, () => [clip(0)])];
    expect(worldIntervals([mixed]).block_count_acc).toEqual([1, 1]);
  });

  it('half the clips fail whole: the interval is about ±0.28 for 12 clips (clip-level), not ±0.08 (frame-level)', () => {
    const units = Array.from({ length: 12 }, (_, i) => [clip(i % 2 ? 24 : 0)]);
    const [lo, hi] = worldIntervals([units]).prompt_color_acc!;
    expect(lo).toBeLessThan(0.3);
    expect(hi).toBeGreaterThan(0.7);
  });

  it('resamples a prompt with all its seeds: 6 prompts × 4 seeds vary as 6 clusters, not 24', () => {
    const units = Array.from({ length: 6 }, (_, i) => Array.from({ length: 4 }, () => clip(i % 2 ? 24 : 0)));
    // by prompt: k/6 of the resample's prompts succeed, the 2.5 % / 97.5 % quantiles are 1/6 and 5/6 (P(k = 0) = 1/64 < 2.5 %)
    expect(worldIntervals([units]).prompt_color_acc).toEqual([0.167, 0.833]);
    const [lo, hi] = worldIntervals([units.flat().map((c) => [c])]).prompt_color_acc!;
    expect(hi - lo).toBeLessThan(0.45);
  });

  it('modes are strata: a mode that always lacks the agent and one that always has it give a zero-width overall interval', () => {
    const t2v = Array.from({ length: 5 }, () => [clip(24, 0)]),
      world = Array.from({ length: 5 }, () => [clip(24, 24)]);
    expect(worldIntervals([t2v, world]).agent_present_rate).toEqual([0.5, 0.5]);
    expect(worldIntervals([[...t2v, ...world]]).agent_present_rate![1] - worldIntervals([[...t2v, ...world]]).agent_present_rate![0]).toBeGreaterThan(0.4);
  });

  it('refuses no unit', () => {
    expect(() => worldIntervals([[], []])).toThrow(/no unit to resample/);
  });
});

describe('one-prompt units (eval:world --prompt)', () => {
  it('one clip per unit, in order', () => {
    const [a, b, c] = [clip(1), clip(2), clip(3)];
    expect(clipUnits([[a, b], [c]])).toEqual([[a], [b], [c]]);
    expect(clipUnits([])).toEqual([]);
  });

  it("pairs each candidate clip with the baseline's clip at the same place", () => {
    const [a, b, x, y] = [clip(1), clip(2), clip(10), clip(20)];
    expect(pairedClipUnits([{ candidate: [a, b], baseline: [x, y] }])).toEqual([
      { candidate: [a], baseline: [x] },
      { candidate: [b], baseline: [y] },
    ]);
    expect(() => pairedClipUnits([{ candidate: [a, b], baseline: [x] }])).toThrow(/holds 2 candidate clips and 1 baseline clips/);
  });

  it('one prompt at 12 seeds, half of them failing whole: the prompt as unit gives a zero-width interval, the clips ±0.28', () => {
    const onePrompt = [Array.from({ length: 12 }, (_, i) => clip(i % 2 ? 24 : 0))];
    expect(worldIntervals([onePrompt]).prompt_color_acc).toEqual([0.5, 0.5]);
    const [lo, hi] = worldIntervals([clipUnits(onePrompt)]).prompt_color_acc!;
    expect(lo).toBeLessThan(0.3);
    expect(hi).toBeGreaterThan(0.7);
    // paired: a candidate 2 colour frames better on the failing seeds only differs by +1/24 with a non-zero-width interval
    const better = onePrompt[0].map((t, i) => (i % 2 ? t : { ...t, colorOk: 2 }));
    const d = worldDifference([pairedClipUnits([{ candidate: better, baseline: onePrompt[0] }])]).prompt_color_acc;
    expect(d.diff).toBeCloseTo(1 / 24, 3);
    expect(d.ci95![0]).toBeLessThan(d.ci95![1]);
    expect(worldDifference([[{ candidate: better, baseline: onePrompt[0] }]]).prompt_color_acc.ci95).toEqual([0.042, 0.042]);
  });
});

describe('worldDifference', () => {
  // prompts differ a lot (colour frames 0…22 of 24), but the candidate draws 2 more colour frames on every one
  // and block frames 24, 22, …, 2 of 24 counted right
  const baseline = Array.from({ length: 12 }, (_, i) => [withBlocks(clip(2 * i, 12, 10, 5), 24 - 2 * i)]);
  const paired = (candidate: WorldClipTally[][]): PairedWorldUnit[] => candidate.map((c, i) => ({ candidate: c, baseline: baseline[i] }));

  it('the same weights: differences 0 with [0, 0]', () => {
    // baseline: colour frames 0, 2, …, 22 of 24 each → 132 / 288; present 12 / 24; followed 5 of 10 pairs; blocks
    // counted right in 156 / 288 frames
    expect(worldDifference([paired(baseline)])).toEqual({
      prompt_color_acc: { candidate: 0.458, baseline: 0.458, diff: 0, ci95: [0, 0] },
      action_follow_acc: { candidate: 0.5, baseline: 0.5, diff: 0, ci95: [0, 0] },
      agent_present_rate: { candidate: 0.5, baseline: 0.5, diff: 0, ci95: [0, 0] },
      block_count_acc: { candidate: 0.542, baseline: 0.542, diff: 0, ci95: [0, 0] },
      // world-session clips only: no T2V motion pair
      t2v_motion_rate: { candidate: null, baseline: null, diff: null, ci95: null },
    });
  });

  it('pairing cancels the spread between prompts: +2 colour frames of 24 everywhere is +0.083 with [0.083, 0.083]', () => {
    const better = baseline.map(([t]) => [{ ...t, colorOk: t.colorOk + 2 }]);
    const d = worldDifference([paired(better)]);
    expect(d.prompt_color_acc).toEqual({ candidate: 0.542, baseline: 0.458, diff: 0.083, ci95: [0.083, 0.083] });
    // unpaired, the same candidate's own interval is wide
    const [lo, hi] = worldIntervals([better]).prompt_color_acc!;
    expect(hi - lo).toBeGreaterThan(0.3);
  });

  it('a worse candidate on one figure: the interval is below 0 there and [0, 0] elsewhere', () => {
    const worse = baseline.map(([t], i) => [{ ...t, followed: i % 3 ? t.followed - 3 : t.followed - 1 }]);
    const d = worldDifference([paired(worse)]);
    expect(d.action_follow_acc.diff).toBeCloseTo(-(8 * 3 + 4 * 1) / 120, 3);
    expect(d.action_follow_acc.ci95![1]).toBeLessThan(0);
    expect(d.prompt_color_acc.ci95).toEqual([0, 0]);
    expect(d.block_count_acc.ci95).toEqual([0, 0]);
  });

  it('block_count_acc is compared too: more blocks counted right is a difference above 0, fewer one below', () => {
    const better = baseline.map(([t], i) => [{ ...t, blockOk: t.blockOk + (i % 3 ? 2 : 0) }]);
    const d = worldDifference([paired(better)]);
    expect(d.block_count_acc.diff).toBeCloseTo((8 * 2) / 288, 3);
    expect(d.block_count_acc.ci95![0]).toBeGreaterThan(0);
    expect(d.prompt_color_acc).toEqual({ candidate: 0.458, baseline: 0.458, diff: 0, ci95: [0, 0] });
    // a candidate that stops drawing the blocks: every block frame fails
    const none = baseline.map(([t]) => [{ ...t, blockOk: 0 }]);
    const r = worldDifference([paired(none)]).block_count_acc;
    expect(r).toMatchObject({ candidate: 0, baseline: 0.542, diff: -0.542 });
    expect(r.ci95![1]).toBeLessThan(0);
  });

  it('no clip that names blocks on either side: null block_count_acc difference and interval', () => {
    const t2v = [{ candidate: [clip(24)], baseline: [clip(20)] }];
    expect(worldDifference([t2v]).block_count_acc).toEqual({ candidate: null, baseline: null, diff: null, ci95: null });
    expect(worldDifference([t2v]).prompt_color_acc.diff).toBe(0.167);
  });

  it('t2v_motion_rate: bounded and paired over the T2V clips that have motion pairs; a still T2V reads 0', () => {
    expect(worldIntervals([Array.from({ length: 8 }, () => [moving(23)])]).t2v_motion_rate).toEqual([1, 1]);
    // 8 prompts, the candidate moves in 23 of 23 pairs, the baseline in 0: +1 everywhere.
    const d = worldDifference([Array.from({ length: 8 }, () => ({ candidate: [moving(23)], baseline: [moving(0)] }))]);
    expect(d.t2v_motion_rate).toEqual({ candidate: 1, baseline: 0, diff: 1, ci95: [1, 1] });
    // Half the prompts move in 23 of 23 pairs and half in 0: the pooled figure is 0.5, its interval spans the spread.
    const [lo, hi] = worldIntervals([Array.from({ length: 8 }, (_, i) => [moving(i % 2 ? 23 : 0)])]).t2v_motion_rate!;
    expect(lo).toBeLessThan(0.5);
    expect(hi).toBeGreaterThan(0.5);
  });

  it('no action pair on either side: null difference and interval', () => {
    const t2v = [{ candidate: [clip(24)], baseline: [clip(20)] }];
    expect(worldDifference([t2v]).action_follow_acc).toEqual({ candidate: null, baseline: null, diff: null, ci95: null });
  });

  it('rounds once: 1 of 22 against 0 is 0.045 (0.04545…), not 0.046 from a figure rounded to 4 decimals first', () => {
    const one = { frames: 22, colorOk: 1, roomOk: 22, blockFrames: 0, blockOk: 0, present: 22, pairs: 0, followed: 0, motionPairs: 0, moved: 0 };
    const d = worldDifference([[{ candidate: [one], baseline: [{ ...one, colorOk: 0 }] }]]);
    expect(d.prompt_color_acc).toEqual({ candidate: 0.045, baseline: 0, diff: 0.045, ci95: [0.045, 0.045] });
  });
});

describe('tallies file', () => {
  const settings = {
    width: 64,
    height: 64,
    fps: 8,
    flowShift: 3,
    chunkFrames: 1,
    sinkFrames: 1,
    localWindowFrames: 6,
    stepsPerChunk: 2,
    firstChunkSteps: 16,
    task: 'WORLD',
    matmulDtype: 'float32',
  };
  const rec = (o: Partial<WorldTallyRecord> = {}): WorldTallyRecord => ({
    mode: 'world',
    unit: 0,
    seed: 200,
    prompt: 'a yellow ball in a dark green room with two red blocks',
    frames: 24,
    colorOk: 10,
    roomOk: 24,
    blockFrames: 24,
    blockOk: 18,
    present: 12,
    pairs: 8,
    followed: 5,
    motionPairs: 0,
    moved: 0,
    settings,
    ...o,
  });
  const file = (clips: unknown) => JSON.stringify({ format: 'omnirx-world-tallies', version: 4, clips });
  const { settings: _settings, ...recNoSettings } = rec();
  const { blockFrames: _blockFrames, blockOk: _blockOk, ...recNoBlocks } = rec();

  it("reads a file this version writes, and groups a prompt's seeds into one unit per mode", () => {
    const clips = [rec(), rec({ seed: 1200 }), rec({ unit: 1, seed: 201 }), rec({ mode: 't2v', unit: 0, seed: 100, pairs: 0, followed: 0 })];
    const parsed = parseWorldTallies(file(clips), 'base.json');
    expect(parsed.clips).toEqual(clips);
    const units = unitsByMode(parsed.clips);
    expect(units.world.map((u) => u.length)).toEqual([2, 1]);
    expect(units.t2v.map((u) => u.length)).toEqual([1]);
  });

  it('reads a file written before the T2V motion counts as none: its t2v_motion_rate is null, the other figures as they were', () => {
    const { motionPairs: _p, moved: _m, ...old } = rec({ mode: 't2v', pairs: 0, followed: 0 });
    const parsed = parseWorldTallies(file([old]), 'old.json').clips;
    expect(parsed[0]).toMatchObject({ motionPairs: 0, moved: 0, colorOk: 10, present: 12 });
    const t2v = rec({ mode: 't2v', pairs: 0, followed: 0, motionPairs: 11, moved: 4 });
    expect(parseWorldTallies(file([t2v]), 'new.json').clips[0]).toEqual(t2v);
  });

  it('splits records by whether their prompt names blocks, each part in order, so its figures can be read apart', () => {
    const plain = (o: Partial<WorldTallyRecord>) => rec({ prompt: 'a yellow ball in a dark green room', blockFrames: 0, blockOk: 0, ...o });
    const clips = [
      rec(),
      plain({ unit: 1 }),
      rec({ seed: 1200, blockOk: 0 }),
      plain({ mode: 't2v', unit: 2, seed: 102, pairs: 0, followed: 0 }),
      plain({ unit: 1, seed: 1201 }),
    ];
    const { withoutBlocks, withBlocks } = splitByBlocks(parseWorldTallies(file(clips), 'base.json').clips);
    expect(withBlocks).toEqual([clips[0], clips[2]]);
    expect(withoutBlocks).toEqual([clips[1], clips[3], clips[4]]);
    // block_count_acc of the part with blocks: 18 of 48 frames; the part without has none to count
    expect(worldFigures(unitsByMode(withBlocks).world.flat()).block_count_acc).toBeCloseTo(18 / 48, 12);
    expect(worldFigures(unitsByMode(withoutBlocks).world.flat()).block_count_acc).toBeNull();
    expect(splitByBlocks([])).toEqual({ withoutBlocks: [], withBlocks: [] });
  });

  it("gives each prompt's figures over its seeds, T2V prompts first, each mode in order of first appearance", () => {
    const plain = 'a cyan ball in a gray room';
    const t2v = (o: Partial<WorldTallyRecord>) =>
      rec({ mode: 't2v', prompt: plain, frames: 16, colorOk: 16, roomOk: 16, blockFrames: 0, blockOk: 0, present: 4, pairs: 0, followed: 0, ...o });
    // world unit 0 at two seeds, then a T2V prompt at two seeds, then world unit 1 once
    const clips = [
      rec(),
      t2v({ unit: 0, seed: 100 }),
      rec({ seed: 1200, colorOk: 20, blockOk: 6, present: 24, pairs: 12, followed: 11 }),
      rec({ unit: 1, seed: 201, prompt: plain, blockFrames: 0, blockOk: 0 }),
      t2v({ unit: 0, seed: 1100, present: 12, colorOk: 8 }),
    ];
    const byPrompt = figuresByPrompt(parseWorldTallies(file(clips), 'base.json').clips);
    expect(byPrompt.map((p) => [p.mode, p.prompt, p.clips, p.frames])).toEqual([
      ['t2v', plain, 2, 32],
      ['world', rec().prompt, 2, 48],
      ['world', plain, 1, 24],
    ]);
    // T2V: colour (16 + 8) / 32, one agent (4 + 12) / 32, no pairs, no blocks named
    expect(byPrompt[0]).toMatchObject({ prompt_color_acc: 0.75, agent_present_rate: 0.5, action_follow_acc: null, action_pairs: 0, block_count_acc: null });
    // world unit 0: colour (10 + 20) / 48 = 0.625, one agent (12 + 24) / 48 = 0.75, followed (5 + 11) / (8 + 12) = 0.8, blocks (18 + 6) / 48 = 0.5
    expect(byPrompt[1]).toMatchObject({ prompt_color_acc: 0.625, agent_present_rate: 0.75, action_follow_acc: 0.8, action_pairs: 20, block_count_acc: 0.5 });
    // world unit 1, rec()'s counts: colour 10 / 24, one agent 12 / 24, followed 5 / 8
    expect(byPrompt[2]).toMatchObject({ prompt_color_acc: 0.4167, agent_present_rate: 0.5, action_follow_acc: 0.625, block_count_acc: null });
    expect(figuresByPrompt([])).toEqual([]);
  });

  it.each([
    ['not JSON', '{"format": ', /^base\.json: not JSON/],
    ['another format', JSON.stringify({ format: 'other', version: 1, clips: [rec()] }), /^base\.json: format: /],
    ['a later version', JSON.stringify({ format: 'omnirx-world-tallies', version: 5, clips: [rec()] }), /^base\.json: version: /],
    [
      'a version-3 file (no block counts)',
      JSON.stringify({ format: 'omnirx-world-tallies', version: 3, clips: [recNoBlocks] }),
      /^base\.json: version: 3 has no block counts \(block_count_acc, since 2026-12-04\); re-run that evaluation to write version 4$/,
    ],
    [
      'a version-2 file (action counts by the earlier blocked-move rule)',
      JSON.stringify({ format: 'omnirx-world-tallies', version: 2, clips: [rec()] }),
      /^base\.json: version: 2 counts followed actions by the detector's blocked-move rule before 2026-12-02; re-run that evaluation to write version 4$/,
    ],
    [
      'a version-1 file',
      JSON.stringify({ format: 'omnirx-world-tallies', version: 1, clips: [recNoSettings] }),
      /^base\.json: version: 1 counts followed actions/,
    ],
    ['a record without settings', file([recNoSettings]), /^base\.json: clips\.0\.settings: /],
    ['settings that are not an object', file([rec({ settings: 'euler' as unknown as WorldTallyRecord['settings'] })]), /^base\.json: clips\.0\.settings: /],
    [
      'a setting that is an object',
      file([rec({ settings: { ...settings, sampler: { kind: 'euler' } as unknown as string } })]),
      /^base\.json: clips\.0\.settings\.sampler: /,
    ],
    [
      'more than 32 settings',
      file([rec({ settings: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, i])) })]),
      /^base\.json: clips\.0\.settings: more than 32 settings/,
    ],
    ['no clips', file([]), /^base\.json: clips: /],
    ['clips not an array', file({ 0: rec() }), /^base\.json: clips: /],
    ['an unknown field', file([{ ...rec(), extra: 1 }]), /^base\.json: clips\.0: .*extra/],
    ['an unknown mode', file([rec({ mode: 'video' as 'world' })]), /^base\.json: clips\.0\.mode: /],
    ['a negative count', file([rec(), rec({ unit: 1, present: -1 })]), /^base\.json: clips\.1\.present: /],
    ['a fractional count', file([rec({ frames: 23.5 })]), /^base\.json: clips\.0\.frames: /],
    [
      'a clip of no frames',
      file([rec({ frames: 0, colorOk: 0, roomOk: 0, blockFrames: 0, blockOk: 0, present: 0, pairs: 0, followed: 0 })]),
      /^base\.json: clips\.0\.frames: /,
    ],
    ['a version-4 record without block counts', file([recNoBlocks]), /^base\.json: clips\.0\.blockFrames: /],
    ['a negative block count', file([rec({ blockOk: -1 })]), /^base\.json: clips\.0\.blockOk: /],
    ['a count that is a string', file([rec({ pairs: '8' as unknown as number })]), /^base\.json: clips\.0\.pairs: /],
    [
      'a count too large for a number (1e400 parses as Infinity)',
      `{"format": "omnirx-world-tallies", "version": 4, "clips": [${JSON.stringify(rec()).replace('"frames":24', '"frames":1e400')}]}`,
      /^base\.json: clips\.0\.frames: /,
    ],
    ["a count of 1e300, by the file's bound", file([rec({ pairs: 1e300 })]), /^base\.json: clips\.0\.pairs: Too big: expected number to be <=1000000000$/],
    ['a seed over 32 bits', file([rec({ seed: 2 ** 32 })]), /^base\.json: clips\.0\.seed: /],
    ['more followed than pairs', file([rec({ followed: 9 })]), /^base\.json: clips\.0: counts are inconsistent/],
    ['more pairs than frames with the agent allow', file([rec({ present: 8, pairs: 8, followed: 0 })]), /^base\.json: clips\.0: counts are inconsistent/],
    ['more colour frames than room frames', file([rec({ colorOk: 24, roomOk: 20 })]), /^base\.json: clips\.0: counts are inconsistent/],
    [
      'more blocks counted right than block frames',
      file([rec(), rec({ unit: 1, blockFrames: 12, blockOk: 13 })]),
      /^base\.json: clips\.1: counts are inconsistent: need .*blockOk ≤ blockFrames ≤ frames/,
    ],
    [
      'more block frames than frames',
      file([rec({ blockFrames: 25, blockOk: 0 })]),
      /^base\.json: clips\.0: counts are inconsistent: need .*blockOk ≤ blockFrames ≤ frames/,
    ],
    ['action pairs in a T2V clip', file([rec({ mode: 't2v' })]), /^base\.json: clips\.0\.pairs: a t2v clip has no action pairs/],
    ['T2V motion pairs in a world clip', file([rec({ motionPairs: 3, moved: 1 })]), /^base\.json: clips\.0\.motionPairs: a world clip has no T2V motion pairs/],
    [
      'more moved than motion pairs',
      file([rec({ mode: 't2v', pairs: 0, followed: 0, motionPairs: 3, moved: 4 })]),
      /^base\.json: clips\.0: counts are inconsistent: need .*moved ≤ motionPairs/,
    ],
    [
      'more motion pairs than frames with the agent allow',
      file([rec({ mode: 't2v', pairs: 0, followed: 0, motionPairs: 12, moved: 0 })]),
      /^base\.json: clips\.0: counts are inconsistent/,
    ],
    [
      'motion pairs as text',
      file([rec({ mode: 't2v', pairs: 0, followed: 0, motionPairs: '3' as unknown as number })]),
      /^base\.json: clips\.0\.motionPairs: /,
    ],
    [
      'a repeated clip',
      file([rec(), rec({ prompt: 'a red ball in a brown room with a white block' })]),
      /^base\.json: clips\.1: world unit 0 seed 200 repeats clips\.0/,
    ],
    [
      'block frames for a prompt that names no blocks',
      file([rec({ prompt: 'a yellow ball in a dark green room' })]),
      /^base\.json: clips\.0\.blockFrames: 24 block frames for 24 frames of "a yellow ball in a dark green room": a prompt that names blocks has every frame scored on them \(blockFrames = frames\), one that names none has 0$/,
    ],
    [
      'fewer block frames than frames for a prompt that names blocks',
      file([rec({ blockFrames: 20 })]),
      /^base\.json: clips\.0\.blockFrames: 20 block frames for 24 frames of "a yellow ball in a dark green room with two red blocks"/,
    ],
  ])('refuses %s, naming the field', (_what, text, message) => {
    expect(() => parseWorldTallies(text, 'base.json')).toThrow(message);
  });

  it('refuses prototype keys, at the top and in a record, and pollutes nothing', () => {
    const top = `{"__proto__": {"polluted": 1}, "format": "omnirx-world-tallies", "version": 4, "clips": [${JSON.stringify(rec())}]}`;
    expect(() => parseWorldTallies(top, 'base.json')).toThrow(/^base\.json: \(root\): .*__proto__/);
    const inner = file([rec()]).replace('"clips":[{', '"clips":[{"__proto__":{"polluted":1},');
    const inSettings = file([rec()]).replace('"settings":{', '"settings":{"__proto__":{"polluted":1},');
    expect(inSettings).toContain('"settings":{"__proto__":{"polluted":1},');
    const parsed = parseWorldTallies(inSettings, 'base.json').clips[0].settings!;
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(inner).toContain('"clips":[{"__proto__":{"polluted":1},"mode":"world"');
    expect(() => parseWorldTallies(inner, 'base.json')).toThrow(/^base\.json: clips\.0: .*__proto__/);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('what eval:world writes reads back the same', () => {
    const clips = [rec(), rec({ mode: 't2v', seed: 100, pairs: 0, followed: 0 })];
    expect(parseWorldTallies(JSON.stringify(worldTalliesFile(clips)), 'x.json')).toEqual({ format: 'omnirx-world-tallies', version: 4, clips });
  });

  it('pairs two sampler settings of the same clips only when asked, and names every setting that differs', () => {
    const base = [rec({ colorOk: 4, settings: { ...settings, stepsPerChunk: 4, firstChunkSteps: 8 } })];
    expect(() => pairWithBaseline([rec({ colorOk: 7 })], base)).toThrow(
      'baseline: clip world unit 0 seed 200 ran with firstChunkSteps 8, this run 16; stepsPerChunk 4, this run 2 (compare runs of the same sampler settings)',
    );
    const p = pairWithBaseline([rec({ colorOk: 7 })], base, false);
    expect(p.world).toEqual([{ candidate: [expect.objectContaining({ colorOk: 7 })], baseline: [expect.objectContaining({ colorOk: 4 })] }]);
    expect(settingDifference(settings, { ...settings, sampler: 'dmd' })).toBe('sampler "dmd", this run none');
    expect(settingDifference(settings, settings)).toBeUndefined();
    // a setting named like an Object.prototype member is compared as any other, not read from the prototype
    expect(settingDifference({ constructor: 1 }, {})).toBe('constructor none, this run 1');
    expect(() => pairWithBaseline([rec()], base)).toThrow(SettingsMismatchError);
    expect(baselineRecord(rec(), base)).toBe(base[0]);
    expect(baselineRecord(rec({ seed: 1200 }), base)).toBeUndefined();
    expect(() => pairWithBaseline([rec({ seed: 1200 })], base, false)).toThrow('baseline: has no clip world unit 0 seed 1200');
  });

  it('reads a file, refusing a missing one and one over the size limit by name', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'omnirx-tallies-'));
    const ok = path.join(dir, 'ok.json');
    writeFileSync(ok, JSON.stringify(worldTalliesFile([rec()])));
    expect(readWorldTallies(ok).clips).toEqual([rec()]);
    expect(() => readWorldTallies(path.join(dir, 'missing.json'))).toThrow(/missing\.json: cannot read \(ENOENT\)/);
    expect(() => readWorldTallies(dir)).toThrow(/cannot read \(EISDIR\)/);
    const big = path.join(dir, 'big.json');
    writeFileSync(big, Buffer.alloc(MAX_TALLIES_BYTES + 1, 32));
    expect(() => readWorldTallies(big)).toThrow(new RegExp(`big\\.json: ${MAX_TALLIES_BYTES + 1} bytes, more than a tallies file's ${MAX_TALLIES_BYTES}`));
  });

  it('pairs a run with a baseline of the same clips, unit by unit', () => {
    const base = [rec({ colorOk: 4 }), rec({ seed: 1200, colorOk: 6 }), rec({ mode: 't2v', seed: 100, pairs: 0, followed: 0 })];
    const cand = [rec({ seed: 1200, colorOk: 9 }), rec({ colorOk: 7 }), rec({ mode: 't2v', seed: 100, pairs: 0, followed: 0, colorOk: 1 })];
    const p = pairWithBaseline(cand, base);
    expect(p.world).toHaveLength(1);
    expect(p.world[0].candidate.map((t) => t.colorOk)).toEqual([9, 7]);
    expect(p.world[0].baseline.map((t) => t.colorOk)).toEqual([6, 4]);
    expect(p.t2v[0]).toEqual({ candidate: [expect.objectContaining({ colorOk: 1 })], baseline: [expect.objectContaining({ colorOk: 10 })] });
  });

  it("a baseline at more seeds: only the run's clips are compared", () => {
    const p = pairWithBaseline([rec({ colorOk: 7 })], [rec({ colorOk: 4 }), rec({ seed: 1200, colorOk: 6 })]);
    expect(p.world).toEqual([{ candidate: [expect.objectContaining({ colorOk: 7 })], baseline: [expect.objectContaining({ colorOk: 4 })] }]);
    expect(p.t2v).toEqual([]);
  });

  it('refuses a baseline of another set, naming the clip', () => {
    expect(() => pairWithBaseline([rec(), rec({ seed: 1200 })], [rec()])).toThrow(
      /baseline: has no clip world unit 0 seed 1200 \(run it with at least as many --seeds\)/,
    );
    expect(() => pairWithBaseline([rec()], [rec({ prompt: 'a red ball in a brown room' })])).toThrow(
      /baseline: clip world unit 0 seed 200 has prompt "a red ball in a brown room", this run "a yellow ball in a dark green room with two red blocks"/,
    );
    expect(() => pairWithBaseline([rec()], [rec({ frames: 16 })])).toThrow(/baseline: clip world unit 0 seed 200 has 16 frames, this run 24/);
  });

  it('refuses a baseline run with other sampler settings, naming the first setting that differs', () => {
    const other = (o: Record<string, string | number>) => [rec({ settings: { ...settings, ...o } })];
    expect(() => pairWithBaseline([rec()], other({ stepsPerChunk: 4 }))).toThrow(
      /baseline: clip world unit 0 seed 200 ran with stepsPerChunk 4, this run 2 \(compare runs of the same sampler settings\)/,
    );
    expect(() => pairWithBaseline([rec()], other({ matmulDtype: 'bfloat16' }))).toThrow(/ran with matmulDtype "bfloat16", this run "float32"/);
    // a setting only one side reports (a runtime that added one), in sorted key order
    expect(() => pairWithBaseline([rec()], other({ sampler: 'euler' }))).toThrow(/ran with sampler "euler", this run none/);
    expect(() => pairWithBaseline([rec({ settings: { ...settings, previewEvery: 4 } })], [rec()])).toThrow(/ran with previewEvery none, this run 4/);
    // the same value as a string is another setting
    expect(() => pairWithBaseline([rec()], other({ fps: '8' }))).toThrow(/ran with fps "8", this run 8/);
    expect(pairWithBaseline([rec()], other({})).world).toHaveLength(1);
  });
});
