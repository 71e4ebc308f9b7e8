/**
 * `npm run eval:world`'s command line (bench/eval-world.ts, built into dist/ by `npm test`'s pretest): bad flags are
 * refused by name with exit 2 before any model loads (a baseline of other sampler settings at the first clip), and
 * --help lists the options.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { T2V_EVAL_PROMPTS, WORLD_EVAL_SESSIONS } from '../../bench/eval/world-clips';
import { T2V_HELD_OUT_PROMPTS, WORLD_HELD_OUT_SESSIONS } from '../../bench/eval/world-held-out';
import { parseWorldPrompt } from '../../bench/eval/world-palette';
import { defaultModelSpec } from '../../src/families/wan/default-spec';

const SCRIPT = path.resolve(__dirname, '..', '..', 'dist', 'bench', 'eval-world.js');
// A deadline against a hung command, not a speed check: the runs that compare against a baseline generate the first
// clip before they refuse, which took over 60 s on a 2-core machine busy with other work.
const RUN_DEADLINE_MS = 180_000;
const run = (...args: string[]) => spawnSync(process.execPath, [SCRIPT, ...args], { encoding: 'utf8', timeout: RUN_DEADLINE_MS });
jest.setTimeout(RUN_DEADLINE_MS + 30_000);
const dir = mkdtempSync(path.join(tmpdir(), 'omnirx-eval-cli-'));
const file = (name: string, text: string) => {
  writeFileSync(path.join(dir, name), text);
  return path.join(dir, name);
};
const tallies = (clips: unknown[], version = 4) => JSON.stringify({ format: 'omnirx-world-tallies', version, clips });
/** One T2V record of the set's first prompt (its settings do not matter to the refusals below: those come first). */
const t2v0 = {
  mode: 't2v',
  unit: 0,
  seed: 100,
  prompt: 'a red ball in a dark blue room',
  frames: 16,
  colorOk: 1,
  roomOk: 16,
  blockFrames: 0,
  blockOk: 0,
  present: 9,
  pairs: 0,
  followed: 0,
  settings: {},
};

describe('eval:world command line', () => {
  it.each([
    [['--seeds', '0'], /--seeds must be an integer in \[1, 100\]; got "0"/],
    [['--seeds', '101'], /--seeds must be an integer in \[1, 100\]; got "101"/],
    [['--seeds', '1.5'], /--seeds must be an integer in \[1, 100\]; got "1.5"/],
    [['--seeds', 'NaN'], /--seeds must be an integer in \[1, 100\]; got "NaN"/],
    [['--seeds', '1e2'], /--seeds must be an integer in \[1, 100\]; got "1e2"/],
    [['--seeds'], /option '--seeds <k>' argument missing/],
    [['--matmul-dtype', 'fp8'], /--matmul-dtype <dtype>' argument 'fp8' is invalid. Allowed choices are float32, bfloat16/],
    [['--sessions', '4'], /unknown option '--sessions'/],
    [['--first-frame', 'corner'], /--first-frame <start>' argument 'corner' is invalid. Allowed choices are prompt, spawn, off-centre/],
    [['--first-frame'], /option '--first-frame <start>' argument missing/],
    [['--prompt-set', 'train'], /--prompt-set <set>' argument 'train' is invalid. Allowed choices are eval, held-out, color-pairs/],
    [['--prompt-set'], /option '--prompt-set <set>' argument missing/],
    // a baseline of the default set does not hold the held-out set's clips (other seeds and prompts)
    [
      ['--prompt-set', 'held-out', '--baseline', file('default-set.json', tallies([t2v0]))],
      /error: --baseline: baseline: has no clip t2v unit 0 seed 500 \(it has prompt "a red ball in a dark blue room" there: a run of another --prompt-set or --prompt\)/,
    ],
    // nor of the colour-pair set's (its first T2V clip is the red agent beside green blocks at seed 700)
    [
      ['--prompt-set', 'color-pairs', '--baseline', file('default-set-2.json', tallies([t2v0]))],
      /error: --baseline: baseline: has no clip t2v unit 0 seed 700 \(it has prompt "a red ball in a dark blue room" there: a run of another --prompt-set or --prompt\)/,
    ],
    [['--prompt-set', 'colour-pairs'], /--prompt-set <set>' argument 'colour-pairs' is invalid. Allowed choices are eval, held-out, color-pairs/],
    [
      ['--prompt', 'a purple ball in a dark blue room'],
      /--prompt <text>' argument 'a purple ball in a dark blue room' is invalid\. the prompt is outside the world grammar/,
    ],
    [['--prompt', 'a red ball'], /argument 'a red ball' is invalid\. the prompt is outside the world grammar: "a\|an <colour> <noun> in a <room colour> room/],
    [
      ['--prompt', 'a constructor ball in a dark blue room'],
      /argument 'a constructor ball in a dark blue room' is invalid\. the prompt is outside the world grammar/,
    ],
    [['--prompt', ''], /argument '' is invalid\. the prompt is outside the world grammar/],
    [['--prompt'], /option '--prompt <text>' argument missing/],
    [['--prompt', 'a red ball in a dark blue room', '--prompt-set', 'held-out'], /option '--prompt <text>' cannot be used with option '--prompt-set <set>'/],
    // a baseline of the default set holds no clip of a one-prompt run (seed 900)
    [
      ['--prompt', 'a red ball in a gray room', '--baseline', file('default-set-3.json', tallies([t2v0]))],
      /error: --baseline: baseline: has no clip t2v unit 0 seed 900 \(it has prompt "a red ball in a dark blue room" there: a run of another --prompt-set or --prompt\)/,
    ],
    // the default set's first prompt: the baseline holds it, at another seed
    [
      ['--prompt', 'a red ball in a dark blue room', '--baseline', file('default-set-4.json', tallies([t2v0]))],
      /has no clip t2v unit 0 seed 900 \(run it with at least as many --seeds\)/,
    ],
    [['--prompt', '-h'], /--prompt is missing its value \("-h" looks like a flag\)/],
    [['--per-prompt', 'yes'], /error: too many arguments\. Expected 0 arguments but got 1/],
    [['--strips', '--seeds', '4'], /--strips is missing its value \("--seeds" looks like a flag\)/],
    [['--strips', '-h'], /--strips is missing its value \("-h" looks like a flag\)/],
    [['--tallies-out', '--seeds'], /--tallies-out is missing its value/],
    [['--baseline', '/nonexistent/base.json'], /\/nonexistent\/base.json: cannot read \(ENOENT\)/],
    [
      ['--baseline', file('other-set.json', tallies([t2v0]))],
      /error: --baseline: baseline: has no clip t2v unit 1 seed 101 \(it holds fewer prompts: a run of another --prompt-set or --prompt\)/,
    ],
    [['--seeds', '2', '--baseline', file('one-seed.json', tallies([t2v0]))], /has no clip t2v unit 1 seed 101/],
    [['--allow-other-settings', '--baseline', file('one-prompt.json', tallies([t2v0]))], /has no clip t2v unit 1 seed 101/],
    [['--baseline', file('text.json', 'not json')], /text\.json: not JSON/],
    [['--baseline', file('v5.json', tallies([], 5))], /v5\.json: version: /],
    [
      ['--baseline', file('v3.json', tallies([{ ...t2v0, blockFrames: undefined, blockOk: undefined }], 3))],
      /v3\.json: version: 3 has no block counts \(block_count_acc, since 2026-12-04\); re-run that evaluation to write version 4/,
    ],
    [
      ['--baseline', file('v2.json', tallies([t2v0], 2))],
      /v2\.json: version: 2 counts followed actions by the detector's blocked-move rule before 2026-12-02; re-run that evaluation to write version 4/,
    ],
    [['--baseline', file('bad-count.json', tallies([{ ...t2v0, present: 99 }]))], /bad-count\.json: clips\.0: counts are inconsistent/],
    [
      ['--baseline', file('bad-block-count.json', tallies([{ ...t2v0, blockFrames: 16, blockOk: 17 }]))],
      /bad-block-count\.json: clips\.0: counts are inconsistent/,
    ],
    [['--allow-other-settings'], /error: --allow-other-settings needs --baseline/],
    [['--baseline', '/dev/zero'], /\/dev\/zero: not a regular file/],
    [
      ['--baseline', file('prompt-ran-with.json', tallies([{ ...t2v0, prompt: 'it ran with a red ball' }]))],
      /error: --baseline: baseline: clip t2v unit 0 seed 100 has prompt "it ran with a red ball", this run "a red ball in a dark blue room"$/m,
    ],
    [['--guidance-scale', '-1'], /--guidance-scale must be a number in \[0, 50\]; got "-1"/],
    [['--guidance-scale', '51'], /--guidance-scale must be a number in \[0, 50\]; got "51"/],
    [['--guidance-scale', 'NaN'], /--guidance-scale must be a number in \[0, 50\]; got "NaN"/],
    [['--guidance-scale', '--seeds'], /--guidance-scale must be a number in \[0, 50\]; got "--seeds"/],
    ...['0.5,0.25', '0,1.5', '-0.1,0.5', '0.25', 'a,b', '0,0.25,1', 'NaN,1', '--seeds'].map((v): [string[], RegExp] => [
      ['--guidance-interval', v],
      new RegExp(
        `--guidance-interval must be "start,end", two numbers in \\[0, 1\\] with start ≤ end \\(e\\.g\\. 0,0\\.25\\); got ${JSON.stringify(v).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`,
      ),
    ]),
    [['--eta', '1.5'], /--eta must be a number in \[0, 1\]; got "1\.5"/],
    [['--eta', '-0.1'], /--eta must be a number in \[0, 1\]; got "-0\.1"/],
    [['--eta', 'NaN'], /--eta must be a number in \[0, 1\]; got "NaN"/],
    [['--eta', '--seeds'], /--eta must be a number in \[0, 1\]; got "--seeds"/],
    [['--steps-per-chunk', '0'], /--steps-per-chunk must be an integer in \[1, 50\]; got "0"/],
    [['--steps-per-chunk', '51'], /--steps-per-chunk must be an integer in \[1, 50\]; got "51"/],
    [['--steps-per-chunk', '2.5'], /--steps-per-chunk must be an integer in \[1, 50\]; got "2.5"/],
    [['--steps-per-chunk', '--seeds'], /--steps-per-chunk must be an integer in \[1, 50\]; got "--seeds"/],
  ])('refuses %j by name with exit 2', (args, message) => {
    const r = run(...args);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
    expect(r.status).toBe(2);
  });

  // the default model's guidance interval, as the admitted event reports it
  const [start, end] = defaultModelSpec().defaults.guidanceInterval ?? [0, 1];
  const defaultInterval = { guidanceIntervalStart: start, guidanceIntervalEnd: end };
  // …and its η
  const defaultEta = defaultModelSpec().defaults.eta ?? 0;

  // a baseline of every clip of a set (the default one unless `heldOut`), whose T2V clips ran at guidance scale `g`,
  // the model's guidance interval and η, and whose world sessions record no settings
  const baselineAt = (g: number, heldOut = false) => {
    const t2v = {
      task: 'T2V',
      width: 64,
      height: 64,
      numFrames: 16,
      fps: 8,
      numInferenceSteps: 20,
      guidanceScale: g,
      ...defaultInterval,
      flowShift: 3,
      sampler: 'euler',
      eta: defaultEta,
      matmulDtype: 'float32',
    };
    // no frame scores anything; a prompt that names blocks has each of its frames scored on them
    const counts = (prompt: string, frames: number) => ({
      frames,
      colorOk: 0,
      roomOk: 0,
      blockFrames: parseWorldPrompt(prompt)?.obstacleCount === undefined ? 0 : frames,
      blockOk: 0,
      present: 0,
      pairs: 0,
      followed: 0,
    });
    return tallies([
      ...(heldOut ? T2V_HELD_OUT_PROMPTS : T2V_EVAL_PROMPTS).map((prompt, unit) => ({
        mode: 't2v',
        unit,
        seed: (heldOut ? 500 : 100) + unit,
        prompt,
        ...counts(prompt, 16),
        settings: t2v,
      })),
      ...(heldOut ? WORLD_HELD_OUT_SESSIONS : WORLD_EVAL_SESSIONS).map((s, unit) => ({
        mode: 'world',
        unit,
        seed: s.seed,
        prompt: s.prompt,
        ...counts(s.prompt, s.frames),
        settings: {},
      })),
    ]);
  };

  it.each([
    [
      [],
      { firstFrame: 'spawn' },
      /its world sessions started from a given frame \(--first-frame spawn\), this run's from the prompt: they score 24 and 23 frames and do not pair/,
    ],
    [
      ['--first-frame', 'off-centre', '--allow-other-settings'],
      {},
      /its world sessions started from the prompt, this run's from a given frame \(--first-frame off-centre\): they score 24 and 23 frames/,
    ],
  ])(
    'refuses a baseline of the other kind of start (prompt or given frame) before any clip, even with --allow-other-settings: %j',
    (args, settings, message) => {
      const world0 = {
        mode: 'world',
        unit: 0,
        seed: 200,
        prompt: WORLD_EVAL_SESSIONS[0].prompt,
        frames: 24,
        colorOk: 1,
        roomOk: 24,
        blockFrames: 0,
        blockOk: 0,
        present: 9,
        pairs: 0,
        followed: 0,
        settings,
      };
      const r = run(...args, '--baseline', file(`start-${args.length}.json`, tallies([t2v0, world0])));
      expect(r.stderr).toMatch(message);
      expect(r.stdout).toBe('');
      expect(r.status).toBe(2);
    },
  );

  it('refuses a baseline run with other sampler settings at the first clip of its mode, naming the setting (exit 2, no figures)', () => {
    const ours = defaultModelSpec().defaults.guidanceScale;
    const r = run('--baseline', file('other-guidance.json', baselineAt(ours + 1)));
    expect(r.stderr).toContain(
      `error: --baseline: baseline: clip t2v unit 0 seed 100 ran with guidanceScale ${ours + 1}, this run ${ours} (compare runs of the same sampler settings); --allow-other-settings pairs them anyway`,
    );
    expect(r.stdout).toBe('');
    expect(r.status).toBe(2);
  });

  it("--guidance-scale sets the T2V clips' guidance: the first clip's admitted settings carry it", () => {
    const ours = defaultModelSpec().defaults.guidanceScale;
    const r = run('--guidance-scale', String(ours + 1.5), '--baseline', file('at-default.json', baselineAt(ours)));
    expect(r.stderr).toContain(`error: --baseline: baseline: clip t2v unit 0 seed 100 ran with guidanceScale ${ours}, this run ${ours + 1.5} (compare`);
    expect(r.stdout).toBe('');
    expect(r.status).toBe(2);
  });

  it("--guidance-interval sets the T2V clips' guidance interval: the first clip's admitted settings carry it", () => {
    const ours = defaultModelSpec().defaults.guidanceScale;
    const r = run('--guidance-interval', '0,0.5', '--baseline', file('interval-at-default.json', baselineAt(ours)));
    expect(r.stderr).toContain(`error: --baseline: baseline: clip t2v unit 0 seed 100 ran with guidanceIntervalEnd ${end}, this run 0.5 (compare`);
    expect(r.stdout).toBe('');
    expect(r.status).toBe(2);
  });

  it("--eta sets the T2V clips' η: the first clip's admitted settings carry it", () => {
    const ours = defaultModelSpec().defaults.guidanceScale;
    const other = defaultEta === 0.25 ? 0.5 : 0.25;
    const r = run('--eta', String(other), '--baseline', file('eta-at-default.json', baselineAt(ours)));
    expect(r.stderr).toContain(`error: --baseline: baseline: clip t2v unit 0 seed 100 ran with eta ${defaultEta}, this run ${other} (compare`);
    expect(r.stdout).toBe('');
    expect(r.status).toBe(2);
  });

  it('--prompt-set held-out runs the held-out set: its first clip is the first held-out T2V prompt at seed 500, paired with a held-out baseline', () => {
    const ours = defaultModelSpec().defaults.guidanceScale;
    const r = run('--prompt-set', 'held-out', '--baseline', file('held-out.json', baselineAt(ours + 1, true)));
    // the baseline holds every clip of the held-out set, so the first clip is generated and refused only for its guidance
    expect(r.stderr).toContain(`error: --baseline: baseline: clip t2v unit 0 seed 500 ran with guidanceScale ${ours + 1}, this run ${ours} (compare`);
    expect(r.stdout).toBe('');
    expect(r.status).toBe(2);
  });

  it('--prompt runs one prompt: its first clip is a T2V clip of it at seed 900, paired with a baseline of that prompt', () => {
    const ours = defaultModelSpec().defaults.guidanceScale;
    const prompt = 'a white ball in a dark blue room with two yellow blocks';
    const t2v = {
      task: 'T2V',
      width: 64,
      height: 64,
      numFrames: 16,
      fps: 8,
      numInferenceSteps: 20,
      guidanceScale: ours + 1,
      ...defaultInterval,
      flowShift: 3,
      sampler: 'euler',
      eta: defaultEta,
      matmulDtype: 'float32',
    };
    const counts = (frames: number) => ({ frames, colorOk: 0, roomOk: 0, blockFrames: frames, blockOk: 0, present: 0, pairs: 0, followed: 0 });
    const base = tallies([
      { mode: 't2v', unit: 0, seed: 900, prompt, ...counts(16), settings: t2v },
      { mode: 'world', unit: 0, seed: 950, prompt, ...counts(24), settings: {} },
    ]);
    // given with other spacing and case: kept as the grammar reads it, so it pairs with the baseline's spelling
    const r = run('--prompt', `  ${prompt.toUpperCase()} `, '--baseline', file('one-prompt-base.json', base));
    expect(r.stderr).toContain('note: --prompt at --seeds 1: its intervals resample 1 clip (zero width) per mode; run --seeds 20 or more for a usable one');
    // the baseline holds the run's clips, so the first one is generated and refused only for its guidance
    expect(r.stderr).toContain(`error: --baseline: baseline: clip t2v unit 0 seed 900 ran with guidanceScale ${ours + 1}, this run ${ours} (compare`);
    expect(r.stdout).toBe('');
    expect(r.status).toBe(2);
  });

  it('--help lists every option and exits 0', () => {
    const r = run('--help');
    expect(r.status).toBe(0);
    for (const flag of [
      '--models-dir <dir>',
      '--model <id>',
      '--seeds <k>',
      '--guidance-scale <g>',
      '--tallies-out <file>',
      '--baseline <file>',
      '--allow-other-settings',
      '--strips <dir>',
      '--matmul-dtype <dtype>',
      '--first-frame <start>',
      '--steps-per-chunk <n>',
      '--prompt-set <set>',
      '--prompt <text>',
      '--per-prompt',
    ])
      expect(r.stdout).toContain(flag);
  });
});
