/**
 * First frames of the procedural world for image-to-world evaluation (bench/eval/world-first-frame.ts): the renderer
 * against the generator's own fixture frames (test/fixtures/world, `/usr/bin/python3 tools/train/make_world_fixtures.py`),
 * byte for byte, and the layouts against the generator's rules, as the detector reads them.
 */
import { detectFrame } from '../../bench/eval/world-detector';
import { OFF_CENTRE_MIN, SPAWN, agentBox, agentFits, layoutWorldScene, renderWorldFrame, type Rect } from '../../bench/eval/world-first-frame';
import { WORLD_EVAL_SESSIONS } from '../../bench/eval/world-clips';
import { WORLD_GEOMETRY, parseWorldPrompt } from '../../bench/eval/world-palette';
import { worldFixtureFrames, worldFixtures } from '../helpers/world-fixtures';

const doc = worldFixtures;

const overlaps = (a: Rect, b: Rect) => a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
const chebyshev = (p: readonly [number, number]) => Math.max(Math.abs(p[0] - SPAWN[0]), Math.abs(p[1] - SPAWN[1]));

describe('renderWorldFrame', () => {
  it("draws the generator's frames byte for byte (discs and squares, with and without blocks)", () => {
    let n = 0;
    doc.clips.forEach((c, i) => {
      const scene = parseWorldPrompt(c.prompt)!;
      const truth = worldFixtureFrames(i);
      c.positions.forEach((p, f) => {
        expect(Buffer.from(renderWorldFrame({ scene, obstacles: c.obstacles, agent: p })).equals(Buffer.from(truth[f]))).toBe(true);
        n++;
      });
    });
    expect(n).toBe(72);
    const shapes = new Set(doc.clips.map((c) => parseWorldPrompt(c.prompt)!.agentShape));
    expect(shapes).toEqual(new Set(['disc', 'square']));
  });
});

describe('layoutWorldScene', () => {
  const prompts = WORLD_EVAL_SESSIONS.map((s) => s.prompt);

  it.each(['spawn', 'off-centre'] as const)('lays out %s starts by the generator rules, as the detector reads them', (start) => {
    for (const prompt of prompts) {
      for (let seed = 0; seed < 40; seed++) {
        const layout = layoutWorldScene(prompt, seed, start);
        const scene = parseWorldPrompt(prompt)!;
        expect(layout.obstacles).toHaveLength(scene.obstacleCount ?? 0);
        for (const [j, r] of layout.obstacles.entries()) {
          expect([r[0] % 4, r[1] % 4, r[2] - r[0], r[3] - r[1]]).toEqual([0, 0, WORLD_GEOMETRY.block, WORLD_GEOMETRY.block]);
          expect(Math.min(r[0], r[1])).toBeGreaterThanOrEqual(12);
          expect(Math.max(r[0], r[1])).toBeLessThanOrEqual(36);
          expect(overlaps(r, agentBox(SPAWN[0], SPAWN[1]))).toBe(false);
          // an agent width and a pixel between any two blocks
          for (const q of layout.obstacles.slice(j + 1)) expect(overlaps([r[0] - 9, r[1] - 9, r[2] + 9, r[3] + 9], q)).toBe(false);
        }
        expect(agentFits(layout.obstacles, ...layout.agent)).toBe(true);
        if (start === 'spawn') expect(layout.agent).toEqual(SPAWN);
        else expect(chebyshev(layout.agent)).toBeGreaterThanOrEqual(OFF_CENTRE_MIN);
        // the detector sees what the prompt says: the room, one agent where it was put, as many blocks as named
        const det = detectFrame(renderWorldFrame(layout), WORLD_GEOMETRY.size, WORLD_GEOMETRY.size, scene);
        expect(det.roomColor).toBe(scene.room);
        expect(det.present).toBe(true);
        expect(det.centroid).toEqual(layout.agent);
        expect(det.blockComponents).toBe(scene.obstacleCount ?? 0);
      }
    }
  });

  it('is deterministic in (prompt, seed), and both starts of a seed share its blocks', () => {
    const p = 'a white square in a dark green room with three red blocks';
    expect(layoutWorldScene(p, 7, 'off-centre')).toEqual(layoutWorldScene(p, 7, 'off-centre'));
    expect(layoutWorldScene(p, 7, 'spawn').obstacles).toEqual(layoutWorldScene(p, 7, 'off-centre').obstacles);
    const layouts = Array.from({ length: 20 }, (_, seed) => JSON.stringify(layoutWorldScene(p, seed, 'off-centre')));
    expect(new Set(layouts).size).toBeGreaterThan(15);
    // off-centre starts spread over the room, not one corner
    const xs = Array.from({ length: 200 }, (_, seed) => layoutWorldScene('a red ball in a gray room', seed, 'off-centre').agent[0]);
    expect(Math.min(...xs)).toBeLessThan(SPAWN[0] - OFF_CENTRE_MIN);
    expect(Math.max(...xs)).toBeGreaterThan(SPAWN[0] + OFF_CENTRE_MIN);
  });

  it('refuses a prompt outside the grammar, naming it', () => {
    expect(() => layoutWorldScene('a purple ball in a dark blue room', 0, 'spawn')).toThrow(
      'world layout: prompt outside the world grammar: "a purple ball in a dark blue room"',
    );
    expect(() => layoutWorldScene('', 0, 'off-centre')).toThrow(/outside the world grammar/);
    expect(() => layoutWorldScene('a red ball in a gray room with four cyan blocks', 0, 'spawn')).toThrow(/outside the world grammar/);
    expect(() => layoutWorldScene('a red ball in a constructor room', 0, 'spawn')).toThrow(/outside the world grammar/);
  });

  it.each([-1, 1.5, 2 ** 32, NaN, Infinity])('refuses seed %p, which is not an unsigned 32-bit integer', (seed) => {
    expect(() => layoutWorldScene('a red ball in a gray room', seed, 'spawn')).toThrow(RangeError);
    expect(() => layoutWorldScene('a red ball in a gray room', seed, 'spawn')).toThrow(`seed must be an unsigned 32-bit integer; got ${seed}`);
  });

  it('lays out the extreme seeds', () => {
    for (const seed of [0, 1, 2 ** 32 - 1]) {
      const layout = layoutWorldScene('a red ball in a gray room with three cyan blocks', seed, 'off-centre');
      expect(layout.obstacles).toHaveLength(3);
      expect(agentFits(layout.obstacles, ...layout.agent)).toBe(true);
      expect(chebyshev(layout.agent)).toBeGreaterThanOrEqual(OFF_CENTRE_MIN);
    }
  });
});
