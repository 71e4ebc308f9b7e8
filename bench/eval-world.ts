/**
 * Quality figures of the embedded default on the procedural world (issue 8): runs the engine with fixed seeds —
 * T2V requests (bidirectional sampling, the model's default steps and guidance) and world sessions (block-causal
 * chunk-by-chunk rollout driven by scripted directional actions, one frame per chunk) — and scores the frames with the
 * colour-segmentation detector (src/eval/world-eval.ts). Prompts follow the generator's grammar
 * (tools/train/procedural_world.py). Prints one JSON line:
 * {"prompt_color_acc", "action_follow_acc", "agent_present_rate", "frames"} (+ the same per mode under "t2v"/"world").
 *
 * `--strips DIR` also writes each clip as a PNG frame strip (t2v-<i>.png, world-<i>.png) with the prompts and actions
 * in DIR/strips.json, for the model card.
 *
 * Run: npm run build && npm run eval:world [-- --models-dir DIR] [-- --model ID] [-- --strips DIR]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { lastValueFrom, toArray } from 'rxjs';
import { Engine } from '../src/engine/engine';
import { frameStripPng } from '../src/eval/frame-strip';
import { evaluateWorld, type WorldEvalClip } from '../src/eval/world-eval';
import { ACTION_KEYS } from '../src/models/wan/actions';
import type { SessionAction } from '../src/request/session-request';

const T2V_PROMPTS = [
  'a red ball in a dark blue room',
  'a yellow square in a gray room with two cyan blocks',
  'a white disc in a black room with a red block',
  'a green cube in a brown room',
  'a cyan ball in a dark green room with three orange blocks',
  'a magenta box in a dark blue room with a white block',
  'an orange dot in a gray room',
  'a red square in a black room with two green blocks',
];
const WORLD_PROMPTS = ['a yellow ball in a dark green room', 'a red cube in a gray room with a white block', 'a cyan disc in a brown room with two magenta blocks', 'a white ball in a dark blue room'];
const T2V_FRAMES = 16;
const WORLD_FRAMES = 24;
/** Directional runs of 4 frames each (up, right, down, left, …), shifted per session. */
const RUN = 4;

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** Splits an RGB24 video [F, H, W, 3] into frames. */
function split(frames: Uint8Array, n: number, width: number, height: number): Uint8Array[] {
  const s = width * height * 3;
  return Array.from({ length: n }, (_, f) => frames.subarray(f * s, (f + 1) * s));
}

async function t2v(engine: Engine, model: string | undefined, prompt: string, seed: number): Promise<WorldEvalClip> {
  const events = await lastValueFrom(engine.generate({ ...(model ? { model } : {}), task: 'T2V', inputs: { prompt }, diffusion: { seed, numFrames: T2V_FRAMES, width: 64, height: 64 } }).pipe(toArray()));
  const fin = events.find((e) => e.type === 'final');
  if (fin === undefined || fin.type !== 'final') throw new Error(`T2V failed: ${JSON.stringify(events.filter((e) => e.type === 'error'))}`);
  const v = fin.output.artifacts.video;
  if (v?.kind !== 'video') throw new Error('T2V returned no video');
  return { prompt, width: v.width, height: v.height, frames: split(v.frames, v.numFrames, v.width, v.height) };
}

async function world(engine: Engine, model: string | undefined, prompt: string, seed: number, shift: number): Promise<WorldEvalClip> {
  const session = await engine.session({ ...(model ? { model } : {}), prompt, seed });
  const frames: Uint8Array[] = [];
  const actions: number[] = [];
  let width = 0, height = 0;
  const keyAt = (f: number): SessionAction['key'] => (['up', 'right', 'down', 'left'] as const)[(Math.floor(f / RUN) + shift) % 4];
  await new Promise<void>((resolve, reject) => {
    session.events$.subscribe({
      next: (ev) => {
        if (ev.type === 'error') reject(new Error(`${ev.code}: ${ev.message}`));
        if (ev.type !== 'chunk' || ev.artifact.kind !== 'video') return;
        const a = ev.artifact;
        width = a.width;
        height = a.height;
        for (const fr of split(a.frames, a.numFrames, a.width, a.height)) {
          frames.push(Uint8Array.from(fr));
          actions.push(ACTION_KEYS.indexOf(ev.rollout!.action.key as (typeof ACTION_KEYS)[number]));
        }
        if (frames.length >= WORLD_FRAMES) {
          session.close();
          return;
        }
        session.actions.next({ key: keyAt(frames.length) }); // the next chunk samples it when it starts
        session.credits.next(a.numFrames);
      },
      complete: () => resolve(),
    });
    session.actions.next({ key: keyAt(0) });
    session.credits.next(1);
  });
  await session.whenReleased();
  return { prompt, width, height, frames: frames.slice(0, WORLD_FRAMES), actions: actions.slice(0, WORLD_FRAMES) };
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
  const engine = await Engine.create(modelsDir ? { modelsDir } : {});
  try {
    const t2vClips: WorldEvalClip[] = [];
    for (const [i, p] of T2V_PROMPTS.entries()) t2vClips.push(await t2v(engine, model, p, 100 + i));
    const worldClips: WorldEvalClip[] = [];
    for (const [i, p] of WORLD_PROMPTS.entries()) worldClips.push(await world(engine, model, p, 200 + i, i));
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
