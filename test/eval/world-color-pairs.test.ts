/**
 * eval:world's colour-pair prompt set (bench/eval/world-color-pairs.ts): one prompt per ordered pair of agent and block
 * colours, phrased as the generator phrases a scene (checked against tools/train/procedural_world.py's `Scene.prompt`).
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { T2V_EVAL_PROMPTS, WORLD_EVAL_SESSIONS } from '../../bench/eval/world-clips';
import { COLOR_PAIR_PROMPTS, T2V_COLOR_PAIR_SEED, WORLD_COLOR_PAIR_SESSIONS } from '../../bench/eval/world-color-pairs';
import { T2V_HELD_OUT_PROMPTS, T2V_HELD_OUT_SEED, WORLD_HELD_OUT_SESSIONS } from '../../bench/eval/world-held-out';
import { parseWorldPrompt } from '../../bench/eval/world-palette';
import { PYTHON, ROOT } from '../helpers/train-python';

const COLORS = ['red', 'green', 'yellow', 'cyan', 'magenta', 'white', 'orange'];

describe('the colour-pair prompt set', () => {
  it('names every ordered pair of distinct agent and block colours once, two blocks in a dark blue room, agent colour major', () => {
    expect(COLOR_PAIR_PROMPTS).toHaveLength(42);
    const scenes = COLOR_PAIR_PROMPTS.map((p) => parseWorldPrompt(p));
    const expected = COLORS.flatMap((a) => COLORS.filter((b) => b !== a).map((b) => `${a}/${b}`));
    expect(scenes.map((s) => `${s!.agentColor}/${s!.obstacleColor}`)).toEqual(expected);
    for (const s of scenes) expect(s).toEqual(expect.objectContaining({ room: 'dark blue', agentShape: 'disc', obstacleCount: 2 }));
    expect(COLOR_PAIR_PROMPTS[0]).toBe('a red ball in a dark blue room with two green blocks');
    expect(COLOR_PAIR_PROMPTS[41]).toBe('an orange ball in a dark blue room with two white blocks');
  });

  it("phrases each prompt as the generator's scenes do (article, count word, plural)", () => {
    const script = [
      'import json, sys',
      `sys.path.insert(0, ${JSON.stringify(path.join(ROOT, 'tools', 'train'))})`,
      'from procedural_world import Scene, OBJECT_COLORS',
      'cs = list(OBJECT_COLORS)',
      "print(json.dumps([Scene('dark blue', a, 'ball', b, [(0, 0, 10, 10), (20, 0, 30, 10)]).prompt for a in cs for b in cs if a != b]))",
    ].join('\n');
    const r = spawnSync(PYTHON, ['-c', script], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual([...COLOR_PAIR_PROMPTS]);
  });

  it('runs the same prompts as T2V clips (seeds 700–741) and world sessions (800–841) of the default shape, seeds apart from the other sets', () => {
    expect(T2V_COLOR_PAIR_SEED).toBe(700);
    expect(WORLD_COLOR_PAIR_SESSIONS.map((s) => s.prompt)).toEqual([...COLOR_PAIR_PROMPTS]);
    expect(WORLD_COLOR_PAIR_SESSIONS.map((s) => s.seed)).toEqual(Array.from({ length: 42 }, (_, i) => 800 + i));
    WORLD_COLOR_PAIR_SESSIONS.forEach((s, i) => expect(s).toEqual({ prompt: s.prompt, seed: 800 + i, frames: 24, run: 4, shift: i % 4 }));
    // every set's own seeds, T2V and world, are distinct and below 1000, the stride `--seeds K` adds per repeat, so
    // no clip of one set or repeat shares a seed with another's
    const seeds = [
      ...T2V_EVAL_PROMPTS.map((_, i) => 100 + i),
      ...WORLD_EVAL_SESSIONS.map((s) => s.seed),
      ...T2V_HELD_OUT_PROMPTS.map((_, i) => T2V_HELD_OUT_SEED + i),
      ...WORLD_HELD_OUT_SESSIONS.map((s) => s.seed),
      ...COLOR_PAIR_PROMPTS.map((_, i) => T2V_COLOR_PAIR_SEED + i),
      ...WORLD_COLOR_PAIR_SESSIONS.map((s) => s.seed),
    ];
    expect(new Set(seeds).size).toBe(seeds.length);
    expect(Math.max(...seeds)).toBeLessThan(1000);
  });
});
