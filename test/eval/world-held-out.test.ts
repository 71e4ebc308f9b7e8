/**
 * eval:world's held-out prompt set (bench/eval/world-held-out.ts): prompts of the generator's grammar that the default
 * set does not hold, drawn by the generator itself (regenerated here from tools/train/procedural_world.py's CLI), so
 * figures on it check a change on prompts it was not chosen on.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { T2V_EVAL_PROMPTS, WORLD_EVAL_SESSIONS } from '../../bench/eval/world-clips';
import { HELD_OUT_PROMPTS, T2V_HELD_OUT_PROMPTS, T2V_HELD_OUT_SEED, WORLD_HELD_OUT_SESSIONS } from '../../bench/eval/world-held-out';
import { parseWorldPrompt } from '../../bench/eval/world-palette';
import { PYTHON, ROOT, scratchDir } from '../helpers/train-python';

const DEFAULT_SET = new Set([...T2V_EVAL_PROMPTS, ...WORLD_EVAL_SESSIONS.map((s) => s.prompt)]);

describe('the held-out prompt set', () => {
  it('is 16 T2V prompts and 16 world sessions, all distinct, all of the grammar, none in the default set', () => {
    expect(T2V_HELD_OUT_PROMPTS).toHaveLength(16);
    expect(WORLD_HELD_OUT_SESSIONS).toHaveLength(16);
    const all = [...T2V_HELD_OUT_PROMPTS, ...WORLD_HELD_OUT_SESSIONS.map((s) => s.prompt)];
    expect(new Set(all).size).toBe(32);
    for (const p of all) {
      expect(parseWorldPrompt(p)).not.toBeUndefined();
      expect(DEFAULT_SET.has(p)).toBe(false);
    }
    // both halves hold prompts with and without blocks, as the default set's do
    for (const half of [T2V_HELD_OUT_PROMPTS, WORLD_HELD_OUT_SESSIONS.map((s) => s.prompt)]) {
      const withBlocks = half.filter((p) => parseWorldPrompt(p)!.obstacleCount !== undefined).length;
      expect(withBlocks).toBeGreaterThan(0);
      expect(withBlocks).toBeLessThan(16);
    }
  });

  it("has the default set's shape with seeds of its own: T2V from 500, world sessions 600–615, runs of 4 frames", () => {
    expect(T2V_HELD_OUT_SEED).toBe(500);
    expect(WORLD_HELD_OUT_SESSIONS.map((s) => s.seed)).toEqual(Array.from({ length: 16 }, (_, i) => 600 + i));
    expect(WORLD_HELD_OUT_SESSIONS.map((s) => s.shift)).toEqual(WORLD_EVAL_SESSIONS.map((s) => s.shift));
    for (const s of WORLD_HELD_OUT_SESSIONS) expect(s).toMatchObject({ frames: 24, run: 4 });
    const defaultSeeds = new Set([...T2V_EVAL_PROMPTS.map((_, i) => 100 + i), ...WORLD_EVAL_SESSIONS.map((s) => s.seed)]);
    for (const seed of [...T2V_HELD_OUT_PROMPTS.map((_, i) => T2V_HELD_OUT_SEED + i), ...WORLD_HELD_OUT_SESSIONS.map((s) => s.seed)])
      expect(defaultSeeds.has(seed)).toBe(false);
  });

  it("is what the generator's CLI draws from seed 777000, in order, without repeats and the default set's prompts", () => {
    const out = path.join(scratchDir('held-out'), 'w.png');
    const r = spawnSync(
      PYTHON,
      [path.join(ROOT, 'tools', 'train', 'procedural_world.py'), '--out', out, '--clips', '48', '--frames', '1', '--seed', '777000'],
      { cwd: ROOT, encoding: 'utf8', timeout: 60_000 },
    );
    expect(r.status).toBe(0);
    const drawn: string[] = [];
    for (const line of r.stdout.trim().split('\n')) {
      const p = (JSON.parse(line) as { prompt: string }).prompt;
      if (!DEFAULT_SET.has(p) && !drawn.includes(p)) drawn.push(p);
    }
    expect(drawn.slice(0, 32)).toEqual([...HELD_OUT_PROMPTS]);
  });
});
