/**
 * Quality figures of the embedded default on the procedural world (issue 8): runs the engine with fixed seeds —
 * T2V requests (bidirectional sampling, the model's default steps and guidance, or `--guidance-scale`) and world
 * sessions (block-causal chunk-by-chunk rollout driven by scripted directional actions, one frame per chunk) — and
 * scores the frames with the
 * colour-segmentation detector (bench/eval/world-eval.ts). Prompts follow the generator's grammar
 * (tools/train/procedural_world.py). Prints one JSON line:
 * {"prompt_color_acc", "room_color_acc", "block_count_acc", "action_follow_acc", "action_pairs", "agent_present_rate",
 * "t2v_motion_rate", "motion_pairs", "frames", "ci95"} (+ the same per mode under "t2v"/"world"; `action_pairs` is the
 * sample size of action_follow_acc; block_count_acc, over the frames of clips whose prompt names blocks, whether as
 * many blocks are drawn as it names, and t2v_motion_rate, over consecutive T2V frames with the agent in both, whether
 * it moved, are reported, not target figures, and null without such a clip or pair; `ci95` the 95 % interval of each
 * target figure, block_count_acc and t2v_motion_rate, bench/eval/world-intervals.ts). Each of the three sections also
 * holds the same figures over the clips whose prompt names no blocks and over those whose prompt names blocks
 * (`prompts_without_blocks`,
 * `prompts_with_blocks`; bench/eval/world-tallies.ts `splitByBlocks`), each with its `ci95` and, with `--baseline`, its
 * `vs_baseline`.
 *
 * `--seeds K` (default 1) runs every T2V prompt and world session at K seeds (the set's seed + 1000·k, k < K): K times
 * the frames and narrower intervals. K = 1 is the 640-frame set of the model card.
 *
 * `--tallies-out FILE` writes every clip's counts and sampler settings (bench/eval/world-tallies.ts); `--baseline FILE`
 * reads such a file of another set of weights, run with at least as many `--seeds`, and adds "vs_baseline" to each
 * section: this run minus the baseline per target figure, block_count_acc and t2v_motion_rate with the paired 95 %
 * interval (`worldDifference`), the way to tell two sets apart. A baseline of other prompts is refused before any clip is
 * generated, one of other sampler settings (steps, guidance scale, session window, `--matmul-dtype`…) at the first clip
 * of each mode (exit 2, the settings named) unless `--allow-other-settings` is given, which pairs two sampler settings
 * of the same weights (the differing settings are printed as a note). Tallies files of version 1 and 2 (before 2026-12-02's blocked-move rule
 * of the detector) are refused: their action counts are not comparable; so are those of version 3 (before
 * 2026-12-04), which have no block counts.
 *
 * `--guidance-scale G` runs the T2V clips at classifier-free guidance scale G instead of the model's default (world
 * sessions run no guidance); `--guidance-interval START,END` guides only the steps whose fraction i/N lies in
 * [START, END) instead of the model's default interval; `--eta E` re-noises each Euler step of the T2V clips and the
 * world sessions with a share E of fresh noise instead of the model's default η.
 *
 * `--first-frame spawn|off-centre` starts every world session from a frame of the procedural world instead of the
 * prompt alone (image-to-world, docs/sessions.md): the session's prompt laid out with the blocks it names and the agent
 * at the spawn point (the room's centre) or at a free place at least 12 px from it (bench/eval/world-first-frame.ts;
 * the same blocks for both at a seed). That given frame is not scored (23 frames a session), and the world clips'
 * settings record `firstFrame`: a `--baseline` run from the other given frame pairs with it only under
 * `--allow-other-settings`, and one from the prompt never does (24 frames a session; refused before any clip). The
 * JSON line then also holds `"first_frame"`, the start.
 *
 * `--steps-per-chunk N` runs the world sessions' chunks after the first at N denoise steps instead of the engine's default
 * (SessionConfig.steps, 2, chosen for 20 fps); the world clips' settings record it (`stepsPerChunk`), so a baseline at
 * the default pairs with it only under `--allow-other-settings`.
 *
 * `--prompt-set held-out` runs the held-out set instead of the default one (`eval`; bench/eval/world-held-out.ts): 16
 * other T2V prompts (seeds 500–515) and 16 other world sessions (seeds 600–615) of the same grammar and shape, to check
 * whether what a change gained on the default set holds on prompts it was not chosen on. `--prompt-set color-pairs` runs
 * one prompt per ordered pair of agent and block colours, "a|an <agent> ball in a dark blue room with two <block> blocks"
 * (42 T2V clips, seeds 700–741, and 42 world sessions, seeds 800–841; bench/eval/world-color-pairs.ts), to find the
 * pairs a model loses the agent on. A baseline of another set is refused before any clip is generated (it has none of
 * this set's clips). The JSON line then also holds `"prompt_set"`, the set's name.
 *
 * `--prompt "TEXT"` evaluates one prompt of the world grammar instead of a set (what a user's own prompt scores): one
 * T2V clip (seed 900) and one world session (seed 950; the default set's first session's actions: up, right, down,
 * left, 4 frames each) per `--seeds` repeat; its intervals take each clip as a unit (the seeds are its independent
 * samples; a set's unit is the prompt; under 10 seeds a note says the intervals are not usable). The prompt is kept
 * trimmed and lower-case, as the grammar reads it, so that runs of it pair. A prompt outside the grammar is refused
 * by name before any model loads, as is `--prompt` with `--prompt-set`. The JSON line then also holds `"prompt"`. Two
 * weights compare on it with `--tallies-out` and `--baseline`, as on a set.
 *
 * `--per-prompt` adds `"per_prompt"`: each prompt's figures over its seeds (`figuresByPrompt`: mode, prompt, clips and
 * the point figures of the top level, without intervals or a baseline's difference), T2V prompts first, in the set's
 * order; with one clip per prompt at `--seeds 1`, run more seeds to compare prompts.
 *
 * `--strips DIR` also writes each clip of the first seed as a PNG frame strip (t2v-<i>.png, world-<i>.png) with the
 * prompts and actions in DIR/strips.json, for the model card.
 *
 * Run: npm run build && npm run eval:world [-- --models-dir DIR] [-- --model ID] [-- --seeds K] [-- --tallies-out FILE]
 *   [-- --baseline FILE [-- --allow-other-settings]] [-- --guidance-scale G] [-- --guidance-interval START,END] [-- --eta E] [-- --strips DIR]
 *   [-- --matmul-dtype bfloat16] (the DiT's matrix products on bf16 operands) [-- --first-frame spawn|off-centre]
 *   [-- --steps-per-chunk N] [-- --prompt-set held-out|color-pairs | -- --prompt "TEXT"] [-- --per-prompt]
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { NUMERIC_FLAGS, parseNumericFlag } from '../src/cli/generate';
import { MATMUL_DTYPES } from '../src/native/plan-builder';
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { Engine } from '../src/engine/engine';
import { frameStripPng } from './eval/frame-strip';
import { tallyWorldClip, worldFigures, type WorldEvalClip } from './eval/world-eval';
import { clipUnits, pairedClipUnits, worldDifference, worldIntervals } from './eval/world-intervals';
import {
  SettingsMismatchError,
  baselineRecord,
  checkSameClips,
  figuresByPrompt,
  pairWithBaseline,
  readWorldTallies,
  settingDifference,
  splitByBlocks,
  unitsByMode,
  worldTalliesFile,
  type WorldTalliesFile,
  type WorldTallyRecord,
} from './eval/world-tallies';
import { ACTION_KEYS } from '../src/request/action';
import { evalSession, T2V_EVAL_PROMPTS, T2V_EVAL_SEED, t2vClip, worldClip, worldClipFromFrame, WORLD_EVAL_SESSIONS } from './eval/world-clips';
import { parseWorldPrompt } from './eval/world-palette';
import { T2V_HELD_OUT_PROMPTS, T2V_HELD_OUT_SEED, WORLD_HELD_OUT_SESSIONS } from './eval/world-held-out';
import { COLOR_PAIR_PROMPTS, T2V_COLOR_PAIR_SEED, WORLD_COLOR_PAIR_SESSIONS } from './eval/world-color-pairs';
import type { AgentStart } from './eval/world-first-frame';
import { isGuidanceInterval, parseGuidanceIntervalText, type GuidanceInterval } from '../src/request/guidance-interval';
import { builtinFamilies } from '../src/families';

const T2V_FRAMES = 16;
/** Seed offset between the repeats of `--seeds` (the sets' own seeds: 100–115 and 200–215; held out, 500–515 and 600–615). */
const SEED_STRIDE = 1000;

/** The prompt sets of `--prompt-set`: T2V prompts (clip i at seed `t2vSeed` + i) and world sessions. */
const PROMPT_SETS = {
  eval: { t2v: T2V_EVAL_PROMPTS, t2vSeed: T2V_EVAL_SEED, world: WORLD_EVAL_SESSIONS },
  'held-out': { t2v: T2V_HELD_OUT_PROMPTS, t2vSeed: T2V_HELD_OUT_SEED, world: WORLD_HELD_OUT_SESSIONS },
  'color-pairs': { t2v: COLOR_PAIR_PROMPTS, t2vSeed: T2V_COLOR_PAIR_SEED, world: WORLD_COLOR_PAIR_SESSIONS },
} as const;

/** `--prompt`'s seeds: its T2V clip's and its world session's (apart from every set's, under the `--seeds` stride). */
const ONE_PROMPT_SEEDS = { t2v: 900, world: 950 } as const;

/** The prompts and seeds of a run: a set of `--prompt-set`, or `--prompt`'s one prompt. */
type PromptSet = { t2v: readonly string[]; t2vSeed: number; world: typeof WORLD_EVAL_SESSIONS };

/** eval:world's options (commander: unknown flags and bad values exit 2 with a message naming the flag). */
interface EvalOptions {
  modelsDir?: string;
  model?: string;
  strips?: string;
  seeds: number;
  talliesOut?: string;
  baseline?: WorldTalliesFile;
  /** Pair with a baseline of other sampler settings (two settings of the same weights). */
  allowOtherSettings?: boolean;
  /** T2V clips' guidance scale (default: the model's). */
  guidanceScale?: number;
  /** T2V clips' guidance interval (default: the model's). */
  guidanceInterval?: GuidanceInterval;
  /** T2V clips' and world sessions' η, the share of fresh noise re-noising each Euler step (default: the model's). */
  eta?: number;
  matmulDtype?: (typeof MATMUL_DTYPES)[number];
  /** Where world sessions start: the prompt alone, or a frame of the world with the agent there (image-to-world). */
  firstFrame: 'prompt' | AgentStart;
  /** World sessions' denoise steps per chunk after the first (default: the engine's, SessionConfig.steps). */
  stepsPerChunk?: number;
  /** Which prompts and seeds: the default set, the held-out one or the colour pairs. */
  promptSet: keyof typeof PROMPT_SETS;
  /** One prompt of the world grammar instead of a set. */
  prompt?: string;
  /** Add each prompt's figures (`per_prompt`). */
  perPrompt?: boolean;
}

/** A numeric flag's parser with the request schema's range (`parseNumericFlag`), for commander. */
const numeric =
  (spec: Parameters<typeof parseNumericFlag>[0]) =>
  (raw: string): number => {
    try {
      return parseNumericFlag(spec, raw);
    } catch (e) {
      throw new InvalidArgumentError((e as Error).message);
    }
  };

/** A text option's parser that refuses a value that looks like a flag (`--strips --seeds 4`, `--strips -h`: the value is missing). */
const text =
  (flag: string) =>
  (raw: string): string => {
    if (raw.startsWith('-')) throw new InvalidArgumentError(`${flag} is missing its value ("${raw}" looks like a flag)`);
    return raw;
  };

/** `--guidance-interval`'s parser: "start,end", two decimal fractions of the steps with start ≤ end. */
const guidanceIntervalArg = (raw: string): GuidanceInterval => {
  const pair = parseGuidanceIntervalText(raw);
  if (pair === undefined || !isGuidanceInterval(pair))
    throw new InvalidArgumentError(`--guidance-interval must be "start,end", two numbers in [0, 1] with start ≤ end (e.g. 0,0.25); got ${JSON.stringify(raw)}`);
  return pair;
};

function parseOptions(argv: readonly string[]): EvalOptions {
  const cmd = new Command('eval-world')
    .description('quality figures of the world model on fixed-seed T2V clips and world sessions (docs/model-card.md)')
    .addOption(new Option('--models-dir <dir>', "directory of model checkpoints (default: the engine's)").argParser(text('--models-dir')))
    .addOption(new Option('--model <id>', "registered model id (default: the engine's default model)").argParser(text('--model')))
    .addOption(
      new Option('--seeds <k>', 'run every prompt and session at k seeds (1–100)')
        .default(1)
        .argParser(numeric({ flag: '--seeds', integer: true, min: 1, max: 100 })),
    )
    .addOption(
      new Option('--guidance-scale <g>', "T2V clips' classifier-free guidance scale (default: the model's; world sessions run none)").argParser(
        numeric(NUMERIC_FLAGS.find((f) => f.flag === '--guidance-scale')!),
      ),
    )
    .addOption(
      new Option(
        '--guidance-interval <start,end>',
        "T2V clips' guidance interval: the fractions [start, end) of the denoise steps guided (default: the model's)",
      ).argParser(guidanceIntervalArg),
    )
    .addOption(
      new Option(
        '--eta <e>',
        "η of the T2V clips and world sessions: the share of fresh noise re-noising each Euler step, 0–1 (default: the model's)",
      ).argParser(numeric(NUMERIC_FLAGS.find((f) => f.flag === '--eta')!)),
    )
    .addOption(new Option('--tallies-out <file>', "write every clip's counts as JSON, a baseline for later runs").argParser(text('--tallies-out')))
    .addOption(
      new Option('--baseline <file>', 'compare with the tallies of another run with at least as many --seeds (paired 95 % intervals)').argParser(
        (raw: string) => {
          try {
            return readWorldTallies(text('--baseline')(raw));
          } catch (e) {
            throw new InvalidArgumentError((e as Error).message);
          }
        },
      ),
    )
    .addOption(
      new Option(
        '--allow-other-settings',
        'pair with a --baseline of other sampler settings, to compare two settings of the same weights (the differences are printed)',
      ),
    )
    .addOption(new Option('--strips <dir>', 'also write the clips of the first seed as PNG frame strips, with strips.json').argParser(text('--strips')))
    .addOption(new Option('--matmul-dtype <dtype>', "dtype of the DiT's matrix products").choices(MATMUL_DTYPES))
    .addOption(
      new Option('--steps-per-chunk <n>', "world sessions' denoise steps per chunk after the first (1–50; default: the engine's)").argParser(
        numeric({ flag: '--steps-per-chunk', integer: true, min: 1, max: 50 }),
      ),
    )
    .addOption(
      new Option(
        '--prompt-set <set>',
        'eval, the default prompt set; held-out, other prompts of the same grammar and shape (bench/eval/world-held-out.ts); or color-pairs, one prompt per ordered pair of agent and block colours, 42 (bench/eval/world-color-pairs.ts)',
      )
        .choices(Object.keys(PROMPT_SETS))
        .default('eval'),
    )
    .addOption(
      new Option(
        '--prompt <text>',
        'evaluate one prompt of the world grammar instead of a set: a T2V clip and a world session per --seeds repeat (seeds 900, 950)',
      )
        .conflicts('promptSet')
        .argParser((given: string) => {
          // one spelling per prompt, so that runs of it pair: trimmed and lower-case, as the grammar reads it
          const raw = text('--prompt')(given).trim().toLowerCase();
          if (parseWorldPrompt(raw) === undefined)
            throw new InvalidArgumentError(
              `the prompt is outside the world grammar: "a|an <colour> <noun> in a <room colour> room[ with a|an|two|three <colour> block(s)]", with the colours and nouns of bench/eval/world-palette.ts (e.g. "a white ball in a dark blue room with two yellow blocks")`,
            );
          return raw;
        }),
    )
    .addOption(new Option('--per-prompt', 'also print each prompt\'s figures over its seeds ("per_prompt")'))
    .addOption(
      new Option(
        '--first-frame <start>',
        'world sessions start from the prompt, or from a frame of the world with the agent at the spawn point or at least 12 px from it (not scored)',
      )
        .choices(['prompt', 'spawn', 'off-centre'])
        .default('prompt'),
    )
    .exitOverride((e) => process.exit(e.exitCode === 0 ? 0 : 2));
  const o = cmd.parse(argv, { from: 'user' }).opts<EvalOptions>();
  if (o.allowOtherSettings && !o.baseline) cmd.error('error: --allow-other-settings needs --baseline (it says which baseline settings may differ)');
  if (o.prompt !== undefined && o.seeds < 10)
    console.error(
      `note: --prompt at --seeds ${o.seeds}: its intervals resample ${o.seeds} clip${o.seeds === 1 ? ' (zero width)' : 's'} per mode; run --seeds 20 or more for a usable one`,
    );
  return o;
}

function writeStrips(dir: string, clips: ReadonlyArray<readonly ['t2v' | 'world', WorldEvalClip]>): void {
  mkdirSync(dir, { recursive: true });
  const index: Array<{ file: string; prompt: string; actions?: string[] }> = [];
  const next = { t2v: 0, world: 0 };
  for (const [kind, c] of clips) {
    const file = `${kind}-${next[kind]++}.png`;
    writeFileSync(path.join(dir, file), frameStripPng(c.frames, c.width, c.height));
    index.push({ file, prompt: c.prompt, ...(c.actions ? { actions: c.actions.map((a) => ACTION_KEYS[a]) } : {}) });
  }
  writeFileSync(path.join(dir, 'strips.json'), JSON.stringify(index, null, 1));
}

/** One clip of the evaluation set: its mode, prompt index (unit), seed and how to generate it. */
interface PlannedClip extends Pick<WorldTallyRecord, 'mode' | 'unit' | 'seed' | 'prompt'> {
  /** Repeat of `--seeds` it belongs to (0: the set's own seeds). */
  repeat: number;
  generate: (engine: Engine) => Promise<WorldEvalClip>;
}

/** The set (or `--prompt`'s one prompt): every T2V prompt and world session at `seeds` seeds, in generation order. */
function plan({
  seeds,
  model,
  guidanceScale,
  guidanceInterval,
  eta,
  firstFrame,
  promptSet,
  prompt,
}: Pick<EvalOptions, 'seeds' | 'model' | 'guidanceScale' | 'guidanceInterval' | 'eta' | 'firstFrame' | 'promptSet' | 'prompt'>): PlannedClip[] {
  const set: PromptSet =
    prompt === undefined ? PROMPT_SETS[promptSet] : { t2v: [prompt], t2vSeed: ONE_PROMPT_SEEDS.t2v, world: [evalSession(ONE_PROMPT_SEEDS.world)(prompt, 0)] };
  const clips: PlannedClip[] = [];
  for (let k = 0; k < seeds; k++) {
    for (const [i, prompt] of set.t2v.entries()) {
      const seed = set.t2vSeed + i + SEED_STRIDE * k;
      clips.push({
        mode: 't2v',
        unit: i,
        seed,
        prompt,
        repeat: k,
        generate: (e) => t2vClip(e, { model, prompt, seed, frames: T2V_FRAMES, guidanceScale, guidanceInterval, eta }),
      });
    }
    for (const [i, s] of set.world.entries()) {
      const seed = s.seed + SEED_STRIDE * k;
      const generate =
        firstFrame === 'prompt'
          ? (e: Engine) => worldClip(e, { model, ...s, seed, eta })
          : (e: Engine) => worldClipFromFrame(e, { model, ...s, seed, eta }, firstFrame);
      clips.push({ mode: 'world', unit: i, seed, prompt: s.prompt, repeat: k, generate });
    }
  }
  return clips;
}

/**
 * Whether the baseline holds these clips (`checkSameClips`: prompts, frame counts, sampler settings). If not, prints
 * why and sets exit status 2, as for any bad flag value (the caller returns; the engine, if open, is closed).
 */
function baselineHolds(run: Parameters<typeof checkSameClips>[0], baseline: Parameters<typeof checkSameClips>[1], sameSettings: boolean): boolean {
  try {
    checkSameClips(run, baseline, sameSettings);
    return true;
  } catch (e) {
    console.error(`error: --baseline: ${(e as Error).message}${e instanceof SettingsMismatchError ? '; --allow-other-settings pairs them anyway' : ''}`);
    process.exitCode = 2;
    return false;
  }
}

/**
 * Whether the baseline's world sessions can pair with this run's by where they start: sessions from the prompt score
 * 24 frames, sessions from a given frame 23 (that frame is left out), so the two never pair, even with
 * `--allow-other-settings`; two given-frame starts do (their settings differ in `firstFrame`). If not, prints why and
 * sets exit status 2, before any clip is generated.
 */
function startsPair(firstFrame: EvalOptions['firstFrame'], baseline: readonly WorldTallyRecord[]): boolean {
  const world = baseline.find((c) => c.mode === 'world');
  const theirs = world === undefined ? firstFrame : String(world.settings.firstFrame ?? 'prompt');
  if ((theirs === 'prompt') === (firstFrame === 'prompt')) return true;
  const says = (start: string) => (start === 'prompt' ? 'from the prompt' : `from a given frame (--first-frame ${start})`);
  console.error(
    `error: --baseline: its world sessions started ${says(theirs)}, this run's ${says(firstFrame)}: they score 24 and 23 frames and do not pair; compare runs of the same kind of start`,
  );
  process.exitCode = 2;
  return false;
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const planned = plan(o);
  const sameSettings = !o.allowOtherSettings;
  if (o.baseline && !(startsPair(o.firstFrame, o.baseline.clips) && baselineHolds(planned, o.baseline.clips, sameSettings))) return; // before any clip is generated
  const engine = await Engine.create({
    families: builtinFamilies(),
    ...(o.modelsDir ? { modelsDir: o.modelsDir } : {}),
    ...(o.matmulDtype ? { matmulDtype: o.matmulDtype } : {}),
    ...(o.stepsPerChunk ? { sessions: { steps: o.stepsPerChunk } } : {}),
  });
  try {
    // each clip is scored as it is generated; frames are kept only for the strips (the first seed)
    const records: WorldTallyRecord[] = [];
    const stripClips: Array<readonly ['t2v' | 'world', WorldEvalClip]> = [];
    const settingsChecked = new Set<'t2v' | 'world'>(); // a mode's clips share their settings; pairWithBaseline checks all
    for (const p of planned) {
      const clip = await p.generate(engine);
      const record = {
        mode: p.mode,
        unit: p.unit,
        seed: p.seed,
        prompt: p.prompt,
        ...tallyWorldClip(clip),
        settings: { ...clip.settings, matmulDtype: o.matmulDtype ?? 'float32' },
      };
      if (o.baseline && !settingsChecked.has(p.mode)) {
        if (!baselineHolds([record], o.baseline.clips, sameSettings)) return; // other sampler settings show at a mode's first clip
        const differs = settingDifference(record.settings, baselineRecord(record, o.baseline.clips)!.settings);
        if (differs) console.error(`note: --baseline: ${p.mode} clips ran with ${differs} (paired anyway: --allow-other-settings)`);
        settingsChecked.add(p.mode);
      }
      records.push(record);
      if (o.strips !== undefined && p.repeat === 0) stripClips.push([p.mode, clip]);
    }
    // the figures of some clips over the given modes; undefined when none of them is of those modes
    const report = (clips: readonly WorldTallyRecord[], modes: ReadonlyArray<'t2v' | 'world'>) => {
      const units = unitsByMode(clips);
      if (!modes.some((m) => units[m].length > 0)) return undefined;
      const paired = o.baseline && pairWithBaseline(clips, o.baseline.clips, sameSettings);
      // a set's unit is the prompt; --prompt's one prompt leaves its clips (seeds) as the independent samples
      const onePrompt = o.prompt !== undefined;
      return {
        ...worldFigures(modes.flatMap((m) => units[m].flat())),
        ci95: worldIntervals(modes.map((m) => (onePrompt ? clipUnits(units[m]) : units[m]))),
        ...(paired ? { vs_baseline: worldDifference(modes.map((m) => (onePrompt ? pairedClipUnits(paired[m]) : paired[m]))) } : {}),
      };
    };
    const { withoutBlocks, withBlocks } = splitByBlocks(records);
    const section = (modes: ReadonlyArray<'t2v' | 'world'>) => ({
      ...report(records, modes),
      prompts_without_blocks: report(withoutBlocks, modes),
      prompts_with_blocks: report(withBlocks, modes),
    });
    console.log(
      JSON.stringify({
        ...section(['t2v', 'world']),
        t2v: section(['t2v']),
        world: section(['world']),
        ...(o.firstFrame !== 'prompt' ? { first_frame: o.firstFrame } : {}),
        ...(o.promptSet !== 'eval' ? { prompt_set: o.promptSet } : {}),
        ...(o.prompt !== undefined ? { prompt: o.prompt } : {}),
        ...(o.perPrompt ? { per_prompt: figuresByPrompt(records) } : {}),
      }),
    );
    if (o.talliesOut !== undefined) writeFileSync(o.talliesOut, JSON.stringify(worldTalliesFile(records)));
    if (o.strips !== undefined) writeStrips(o.strips, stripClips);
  } finally {
    await engine.close();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
