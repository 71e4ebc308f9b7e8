/**
 * Quality figures of the embedded default on the procedural world (issue 8): runs the engine with fixed seeds —
 * T2V requests (bidirectional sampling, the model's default steps and guidance) and world sessions (block-causal
 * chunk-by-chunk rollout driven by scripted directional actions, one frame per chunk) — and scores the frames with the
 * colour-segmentation detector (src/eval/world-eval.ts). Prompts follow the generator's grammar
 * (tools/train/procedural_world.py). Prints one JSON line:
 * {"prompt_color_acc", "action_follow_acc", "action_pairs", "agent_present_rate", "frames"} (+ the same per mode under
 * "t2v"/"world"; `action_pairs` is the sample size of action_follow_acc).
 *
 * `--strips DIR` also writes each clip as a PNG frame strip (t2v-<i>.png, world-<i>.png) with the prompts and actions
 * in DIR/strips.json, for the model card.
 *
 * Run: npm run build && npm run eval:world [-- --models-dir DIR] [-- --model ID] [-- --strips DIR]
 *   [-- --matmul-dtype bfloat16] (the DiT's matrix products on bf16 operands)
 */
import { isMatmulDtype, MATMUL_DTYPES } from '../src/native/plan-builder';
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { Engine } from '../src/engine/engine';
import { frameStripPng } from '../src/eval/frame-strip';
import { evaluateWorld, type WorldEvalClip } from '../src/eval/world-eval';
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

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
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
  const modelsDir = arg('--models-dir');
  const model = arg('--model');
  const matmulDtype = arg('--matmul-dtype');
  if (matmulDtype !== undefined && !isMatmulDtype(matmulDtype)) throw new Error(`--matmul-dtype must be one of ${MATMUL_DTYPES.join(', ')}; got ${JSON.stringify(matmulDtype)}`);
  const engine = await Engine.create({ ...(modelsDir ? { modelsDir } : {}), ...(matmulDtype ? { matmulDtype } : {}) });
  try {
    const t2vClips: WorldEvalClip[] = [];
    for (const [i, p] of T2V_PROMPTS.entries()) t2vClips.push(await t2vClip(engine, { model, prompt: p, seed: 100 + i, frames: T2V_FRAMES }));
    const worldClips: WorldEvalClip[] = [];
    for (const s of WORLD_EVAL_SESSIONS) worldClips.push(await worldClip(engine, { model, ...s }));
    const strips = arg('--strips');
    if (strips !== undefined) writeStrips(strips, t2vClips, worldClips);
    console.log(JSON.stringify({ ...evaluateWorld([...t2vClips, ...worldClips]), t2v: evaluateWorld(t2vClips), world: evaluateWorld(worldClips) }));
  } finally {
    await engine.close();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
