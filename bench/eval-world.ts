/**
 * Quality figures of the embedded default on the procedural world (issue 8): runs the engine with fixed seeds —
 * T2V requests (bidirectional sampling, the model's default steps and guidance) and world sessions (block-causal
 * chunk-by-chunk rollout driven by scripted directional actions, one frame per chunk) — and scores the frames with the
 * colour-segmentation detector (src/eval/world-eval.ts). Prompts follow the generator's grammar
 * (tools/train/procedural_world.py). Prints one JSON line:
 * {"prompt_color_acc", "action_follow_acc", "action_pairs", "agent_present_rate", "frames", "ci95"} (+ the same per
 * mode under "t2v"/"world"; `action_pairs` is the sample size of action_follow_acc; `ci95` the 95 % interval of each
 * target figure by the cluster bootstrap over clips, `worldIntervals`).
 *
 * `--seeds K` (default 1) runs every T2V prompt and world session at K seeds (the set's seed + 1000·k, k < K): K times
 * the frames and narrower intervals, for telling two sets of weights apart. K = 1 is the 640-frame set of the model card.
 *
 * `--strips DIR` also writes each clip as a PNG frame strip (t2v-<i>.png, world-<i>.png) with the prompts and actions
 * in DIR/strips.json, for the model card.
 *
 * Run: npm run build && npm run eval:world [-- --models-dir DIR] [-- --model ID] [-- --strips DIR] [-- --seeds K]
 *   [-- --matmul-dtype bfloat16] (the DiT's matrix products on bf16 operands)
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { parseNumericFlag } from '../src/cli/generate';
import { MATMUL_DTYPES } from '../src/native/plan-builder';
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { Engine } from '../src/engine/engine';
import { frameStripPng } from '../src/eval/frame-strip';
import { tallyWorldClip, worldFigures, worldIntervals, type WorldEvalClip } from '../src/eval/world-eval';
import { ACTION_KEYS } from '../src/models/wan/actions';
import { t2vClip, worldClip, WORLD_EVAL_SESSIONS } from '../src/eval/world-clips';

const T2V_PROMPTS = [
  'a red ball in a dark blue room',
  'a yellow square in a gray room with two cyan blocks',
  'a white disc in a black room with a red block',
  'a green cube in a brown room',
  'a cyan ball in a dark green room with three orange blocks',
  'a magenta box in a dark blue room with a white block',
  'an orange dot in a gray room',
  'a red square in a black room with two green blocks',
  'a yellow ball in a brown room with a cyan block',
  'a white box in a dark green room',
  'a magenta dot in a black room with two yellow blocks',
  'a green square in a gray room with a red block',
  'an orange disc in a dark blue room with three white blocks',
  'a cyan cube in a brown room',
  'a red ball in a gray room with a green block',
  'a yellow disc in a dark blue room',
];
const T2V_FRAMES = 16;
/** Seed offset between the repeats of `--seeds` (the sets' own seeds span 100–115 and 200–215). */
const SEED_STRIDE = 1000;

/** eval:world's options (commander: unknown flags and bad values exit 2 with a message naming the flag). */
interface EvalOptions {
  modelsDir?: string;
  model?: string;
  strips?: string;
  seeds: number;
  matmulDtype?: (typeof MATMUL_DTYPES)[number];
}

function parseOptions(argv: readonly string[]): EvalOptions {
  const cmd = new Command('eval-world')
    .description('quality figures of the world model on fixed-seed T2V clips and world sessions (docs/model-card.md)')
    .option('--models-dir <dir>', "directory of model checkpoints (default: the engine's)")
    .option('--model <id>', "registered model id (default: the engine's default model)")
    .option('--strips <dir>', 'also write every clip as a PNG frame strip, with strips.json')
    .addOption(new Option('--seeds <k>', 'run every prompt and session at k seeds (1–100)').default(1).argParser((raw: string) => {
      try {
        return parseNumericFlag({ flag: '--seeds', integer: true, min: 1, max: 100 }, raw);
      } catch (e) {
        throw new InvalidArgumentError((e as Error).message);
      }
    }))
    .addOption(new Option('--matmul-dtype <dtype>', "dtype of the DiT's matrix products").choices(MATMUL_DTYPES))
    .exitOverride((e) => process.exit(e.exitCode === 0 ? 0 : 2));
  return cmd.parse(argv, { from: 'user' }).opts<EvalOptions>();
}

function writeStrips(dir: string, t2vClips: WorldEvalClip[], worldClips: WorldEvalClip[]): void {
  mkdirSync(dir, { recursive: true });
  const index: Array<{ file: string; prompt: string; actions?: string[] }> = [];
  for (const [kind, clips] of [['t2v', t2vClips], ['world', worldClips]] as const) {
    clips.forEach((c, i) => {
      const file = `${kind}-${i}.png`;
      writeFileSync(path.join(dir, file), frameStripPng(c.frames, c.width, c.height));
      index.push({ file, prompt: c.prompt, ...(c.actions ? { actions: c.actions.map((a) => ACTION_KEYS[a]) } : {}) });
    });
  }
  writeFileSync(path.join(dir, 'strips.json'), JSON.stringify(index, null, 1));
}

async function main(): Promise<void> {
  const { modelsDir, model, strips, seeds, matmulDtype } = parseOptions(process.argv.slice(2));
  const engine = await Engine.create({ ...(modelsDir ? { modelsDir } : {}), ...(matmulDtype ? { matmulDtype } : {}) });
  try {
    const t2vClips: WorldEvalClip[] = [];
    const worldClips: WorldEvalClip[] = [];
    for (let k = 0; k < seeds; k++) {
      for (const [i, p] of T2V_PROMPTS.entries()) t2vClips.push(await t2vClip(engine, { model, prompt: p, seed: 100 + i + SEED_STRIDE * k, frames: T2V_FRAMES }));
      for (const s of WORLD_EVAL_SESSIONS) worldClips.push(await worldClip(engine, { model, ...s, seed: s.seed + SEED_STRIDE * k }));
    }
    if (strips !== undefined) writeStrips(strips, t2vClips, worldClips);
    const t2v = t2vClips.map(tallyWorldClip), world = worldClips.map(tallyWorldClip);
    const report = (t: typeof t2v) => ({ ...worldFigures(t), ci95: worldIntervals(t) });
    console.log(JSON.stringify({ ...report([...t2v, ...world]), t2v: report(t2v), world: report(world) }));
  } finally {
    await engine.close();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
