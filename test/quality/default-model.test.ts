/**
 * The shipped default model (models/omnirx-default, trained by tools/train/recipe.py; issue 8): its directory is the
 * default architecture and within the size limit, and its generations follow the prompt on short fixed-seed
 * rollouts, scored by the colour-segmentation detector (bench/eval), not by eye. `npm run eval:world` runs the full
 * evaluation (≥ 200 frames); its figures are in docs/model-card.md.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { Engine } from '../../src/engine/engine';
import { defaultModelsDir } from '../../src/pipeline/family/catalog';
import { T2V_EVAL_PROMPTS, T2V_EVAL_SEED, t2vClip, worldClip, worldClipFromFrame, WORLD_EVAL_SESSIONS } from '../../bench/eval/world-clips';
import { evaluateWorld } from '../../bench/eval/world-eval';
import { makeModelsDir } from '../helpers/tiny-model';
import { builtinFamilies } from '../../src/families';

const ROOT = path.resolve(__dirname, '..', '..');
const DIR = path.join(defaultModelsDir(), 'omnirx-default');
const CHECK = path.join(ROOT, 'dist', 'tools', 'train', 'check-model-dir.js');

describe('the shipped default model directory', () => {
  it('is the default architecture with trained weights, and every component loads (tools/train/check-model-dir)', () => {
    const r = spawnSync(process.execPath, [CHECK, DIR], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/OK \(trained, default architecture/);
    expect(r.status).toBe(0);
  });

  it('the check refuses a directory of another architecture (seeded tiny model), naming what differs', async () => {
    const tiny = path.join(await makeModelsDir(), 'tiny');
    const r = spawnSync(process.execPath, [CHECK, tiny], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^check-model-dir: weights differs from the embedded default/);
  });

  it('is at most 20 MB in all (float16 storage)', () => {
    const bytes = readdirSync(DIR).reduce((n, f) => n + statSync(path.join(DIR, f)).size, 0);
    expect(bytes).toBeLessThanOrEqual(20_000_000);
  });
});

// Deadlines against a hang, scaled by the T2V clips a test generates: one 16-frame clip at the model's defaults took
// 30–33 s on 2 Zen 4 vCPUs (AMD EPYC family 25) and about a third of that on Zen 5, and up to 3× longer while other
// test files share the cores. A fixed 180 s for 16 clips held on Zen 5 only.
const T2V_CLIP_DEADLINE_MS = 90_000;

describe('generations of the shipped default model (fixed seeds, detector-scored)', () => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await Engine.create({ families: builtinFamilies() });
  });
  afterAll(async () => {
    await engine.close();
  });

  // The room colour follows the prompt in T2V and in world sessions. The agent figures are at issue 8's 0.9 targets
  // over eval:world's whole set at 4 seeds, with intervals reaching below them (docs/model-card.md); what is asserted of
  // them is a floor under the 16 world sessions of `npm run eval:world` (these weights, shipped since the afternoon of
  // 2026-12-07, tools/train/recipe.py's weighted average of its two second runs, with the sessions' η 1 since that
  // evening: prompt colour 0.969, action following 0.908 over 347 frame pairs, agent present 0.961; at η 0: 0.987,
  // 0.912 over 331, 0.932). The floors sit 0.17–0.21 under these figures, more than three times the 8-px recipe's
  // retrain tolerance (±0.05). T2V must move its agent: eval:world's 16 T2V clips move it in 0.315 of 200 frame pairs
  // (the generator's clips 0.758; a still T2V, as at η 1, 0.013), floored at 0.15.
  it(
    'T2V: the room has the prompted colour in every frame, for different prompts',
    async () => {
      const clips = [
        await t2vClip(engine, { prompt: 'a red ball in a dark blue room', seed: 1, frames: 16 }),
        await t2vClip(engine, { prompt: 'a yellow square in a gray room with two cyan blocks', seed: 2, frames: 16 }),
        await t2vClip(engine, { prompt: 'a cyan ball in a dark green room', seed: 3, frames: 16 }),
      ];
      const r = evaluateWorld(clips);
      expect(r.frames).toBe(48);
      expect(r.room_color_acc).toBeGreaterThanOrEqual(0.9);
    },
    3 * T2V_CLIP_DEADLINE_MS,
  );

  it(
    'T2V clips of eval:world move the agent: in at least 15 % of at least 100 frame pairs with it in both frames',
    async () => {
      const clips = [];
      for (const [i, prompt] of T2V_EVAL_PROMPTS.entries()) clips.push(await t2vClip(engine, { prompt, seed: T2V_EVAL_SEED + i, frames: 16 }));
      const r = evaluateWorld(clips);
      expect(r.motion_pairs).toBeGreaterThanOrEqual(100);
      expect(r.t2v_motion_rate).toBeGreaterThanOrEqual(0.15);
    },
    T2V_EVAL_PROMPTS.length * T2V_CLIP_DEADLINE_MS,
  );

  it('world sessions: the room has the prompted colour in every chunk of the rollout', async () => {
    const clips = [
      await worldClip(engine, { prompt: 'a yellow ball in a dark green room', seed: 3, frames: 16, run: 4, shift: 0 }),
      await worldClip(engine, { prompt: 'a white ball in a dark blue room', seed: 4, frames: 16, run: 4, shift: 2 }),
    ];
    const r = evaluateWorld(clips);
    expect(r.frames).toBe(32);
    expect(r.room_color_acc).toBeGreaterThanOrEqual(0.9);
  }, 120_000);

  it('image-to-world from a frame of the world (eval:world --first-frame): the given frame is left out, the start is in the settings, and the rollout keeps the room', async () => {
    const s = { prompt: 'a red cube in a gray room with a white block', seed: 5, frames: 8, run: 4, shift: 1 };
    const clips = [await worldClipFromFrame(engine, s, 'spawn'), await worldClipFromFrame(engine, s, 'off-centre')];
    for (const [c, start] of [
      [clips[0], 'spawn'],
      [clips[1], 'off-centre'],
    ] as const) {
      expect(c.frames).toHaveLength(7);
      expect(c.actions).toEqual([4, 4, 4, 2, 2, 2, 2]); // frames 1–7 (frame 0, the given one, had none): right ×3, down ×4 (ACTION_KEYS ids)
      expect(c.settings).toMatchObject({ task: 'WORLD', firstFrame: start });
    }
    expect(evaluateWorld(clips).room_color_acc).toBeGreaterThanOrEqual(0.9);
  }, 120_000);

  it("world sessions of eval:world: the agent has the prompt's colour in at least 80 % of the frames, is seen exactly once in at least 75 %, and where it is seen in consecutive frames it moves as the action says in at least 70 % of at least 200 pairs", async () => {
    const clips = [];
    for (const s of WORLD_EVAL_SESSIONS) clips.push(await worldClip(engine, s));
    const r = evaluateWorld(clips);
    expect(r.frames).toBe(384);
    expect(r.prompt_color_acc).toBeGreaterThanOrEqual(0.8);
    expect(r.agent_present_rate).toBeGreaterThanOrEqual(0.75);
    expect(r.action_pairs).toBeGreaterThanOrEqual(200);
    expect(r.action_follow_acc).toBeGreaterThanOrEqual(0.7);
  }, 180_000);
});
