/**
 * The world detector on ground-truth frames of the procedural generator (test/fixtures/world, written by
 * `/usr/bin/python3 tools/train/make_world_fixtures.py`) and on noise: it must recover the generator's agent centres
 * and score ~1 on the truth, low on noise, and notice wrong actions and missing or extra blocks.
 */
import { PNG } from 'pngjs';
import { Rng } from '../../src/util/rng';
import { BLOCK_AREA, detectFrame, moveBlocked } from '../../bench/eval/world-detector';
import { frameStripPng } from '../../bench/eval/frame-strip';
import { evaluateWorld, tallyWorldClip, type WorldEvalClip } from '../../bench/eval/world-eval';
import { OBJECT_COLORS, ROOM_COLORS, WORLD_GEOMETRY, parseWorldPrompt, wallColor } from '../../bench/eval/world-palette';
import { worldFixtureFrames, worldFixtures } from '../helpers/world-fixtures';

const doc = worldFixtures;

const clips: WorldEvalClip[] = doc.clips.map((c, i) => ({
  prompt: c.prompt,
  width: doc.size,
  height: doc.size,
  frames: worldFixtureFrames(i),
  actions: c.actions,
}));

describe('world palette', () => {
  it('mirrors the generator', () => {
    expect(WORLD_GEOMETRY).toEqual({ size: doc.size, wall: doc.wall, step: doc.step, agent: doc.agent, block: doc.block });
    expect(BLOCK_AREA).toBe(doc.block * doc.block);
    expect(ROOM_COLORS).toEqual(doc.room_colors);
    expect(OBJECT_COLORS).toEqual(doc.object_colors);
    for (const [name, rgb] of Object.entries(ROOM_COLORS)) expect(wallColor(rgb)).toEqual(doc.wall_colors[name]);
  });

  it('parses the grammar', () => {
    for (const c of doc.clips) {
      const scene = parseWorldPrompt(c.prompt);
      expect(scene).toEqual({
        room: c.room,
        agentColor: c.agent_color,
        agentShape: c.agent_shape,
        obstacleColor: c.obstacle_color ?? undefined,
        obstacleCount: c.obstacles.length || undefined,
      });
      expect(scene!.obstacleCount).toBe(c.obstacles.length || undefined);
    }
    // every count word, and as permissive about "block(s)" as the grammar's regular expression
    for (const [words, n] of [
      ['a white block', 1],
      ['an orange block', 1],
      ['two cyan blocks', 2],
      ['three red blocks', 3],
      ['two cyan block', 2],
      ['a white blocks', 1],
    ] as const) {
      expect(parseWorldPrompt(`a red ball in a gray room with ${words}`)).toMatchObject({ obstacleColor: words.split(' ')[1], obstacleCount: n });
    }
    expect(parseWorldPrompt('a red ball in a gray room')!.obstacleCount).toBeUndefined();
    expect(parseWorldPrompt('a red ball in a gray room with four cyan blocks')).toBeUndefined();
    expect(parseWorldPrompt('a red ball in a gray room with two purple blocks')).toBeUndefined();
    expect(parseWorldPrompt('a purple ball in a dark blue room')).toBeUndefined();
    expect(parseWorldPrompt('a red ball')).toBeUndefined();
    // names of Object.prototype are not colours or nouns of the grammar
    for (const p of [
      'a red ball in a constructor room',
      'a constructor ball in a gray room',
      'a red constructor in a gray room',
      'a red ball in a gray room with a __proto__ block',
      'a tostring ball in a gray room',
      'a red hasownproperty in a black room',
    ]) {
      expect(parseWorldPrompt(p)).toBeUndefined();
    }
  });
});

describe('world detector on ground truth', () => {
  it('finds the agent at the generator positions in every frame', () => {
    expect(clips.reduce((n, c) => n + c.frames.length, 0)).toBe(72);
    doc.clips.forEach((c, i) => {
      const scene = parseWorldPrompt(c.prompt)!;
      clips[i].frames.forEach((rgb, f) => {
        const d = detectFrame(rgb, doc.size, doc.size, scene);
        expect(d.roomColor).toBe(c.room);
        expect(d.present).toBe(true);
        expect(d.duplicated).toBe(false);
        expect(d.centroid![0]).toBeCloseTo(c.positions[f][0], 6);
        expect(d.centroid![1]).toBeCloseTo(c.positions[f][1], 6);
      });
    });
  });

  it('scores 1 on every figure, over every directional frame pair', () => {
    const directional = doc.clips.flatMap((c) => c.actions.filter((a, f) => f > 0 && a > 0)).length;
    expect(directional).toBeGreaterThan(20);
    expect(evaluateWorld(clips)).toEqual({
      prompt_color_acc: 1,
      room_color_acc: 1,
      block_count_acc: 1,
      action_follow_acc: 1,
      action_pairs: directional,
      agent_present_rate: 1,
      t2v_motion_rate: null,
      motion_pairs: 0,
      frames: 72,
    });
  });

  it('t2v_motion_rate: the generator clips scored as T2V (no actions) move in the frames where their positions change', () => {
    // Ground truth from the generator's positions, not the detector: a move is a whole step, a stay (none, blocked) 0.
    const moves = doc.clips.flatMap((c) => c.positions.slice(1).map((p, f) => (p[0] !== c.positions[f][0] || p[1] !== c.positions[f][1] ? 1 : 0)));
    const moved = moves.reduce((x: number, y: number) => x + y, 0);
    expect(moved).toBeGreaterThan(20);
    expect(moved).toBeLessThan(moves.length);
    const asT2v = clips.map(({ actions: _actions, ...c }) => c);
    const r = evaluateWorld(asT2v);
    expect(r.motion_pairs).toBe(moves.length);
    expect(r.t2v_motion_rate).toBe(Math.round((moved / moves.length) * 1e4) / 1e4);
    expect(r.action_follow_acc).toBeNull();
    // A still clip (its first frame repeated) scores 0.
    const still = asT2v.map((c) => ({ ...c, frames: c.frames.map(() => c.frames[0]) }));
    expect(evaluateWorld(still).t2v_motion_rate).toBe(0);
  });

  it('reports the figures in a stable order (the order eval:world prints them)', () => {
    expect(Object.keys(evaluateWorld(clips))).toEqual([
      'prompt_color_acc',
      'room_color_acc',
      'block_count_acc',
      'action_follow_acc',
      'action_pairs',
      'agent_present_rate',
      't2v_motion_rate',
      'motion_pairs',
      'frames',
    ]);
  });

  it('counts as many blocks as the generator drew in every frame, and none for a prompt without blocks', () => {
    expect(
      doc.clips
        .filter((c) => c.obstacles.length > 0)
        .map((c) => c.obstacles.length)
        .sort(),
    ).toEqual([1, 1, 1, 2, 3]);
    doc.clips.forEach((c, i) => {
      const scene = parseWorldPrompt(c.prompt)!;
      const noBlocks = parseWorldPrompt(c.prompt.replace(/ with .*$/, ''))!;
      clips[i].frames.forEach((rgb, f) => {
        expect([i, f, detectFrame(rgb, doc.size, doc.size, scene).blockComponents]).toEqual([i, f, c.obstacles.length]);
        expect(detectFrame(rgb, doc.size, doc.size, noBlocks).blockComponents).toBe(0);
      });
    });
  });

  it('covers blocked moves (a wall or obstacle stops the agent) and still scores them as followed', () => {
    const blocked = doc.clips
      .flatMap((c) =>
        c.actions.map((a, f) => (f > 0 && a > 0 && c.positions[f][0] === c.positions[f - 1][0] && c.positions[f][1] === c.positions[f - 1][1] ? 1 : 0)),
      )
      .reduce((x: number, y: number) => x + y, 0);
    expect(blocked).toBeGreaterThanOrEqual(5);
  });

  it('notices actions the agent did not follow', () => {
    const opposite = [0, 2, 1, 4, 3];
    const wrong = clips.map((c) => ({ ...c, actions: c.actions!.map((a) => opposite[a]) }));
    expect(evaluateWorld(wrong).action_follow_acc!).toBeLessThan(0.35);
  });

  it('notices the wrong prompt colours', () => {
    const swapped = clips.map((c) => ({
      ...c,
      prompt: c.prompt.replace(/in a [a-z ]+ room/, c.prompt.includes('in a gray room') ? 'in a brown room' : 'in a gray room'),
    }));
    expect(evaluateWorld(swapped).prompt_color_acc).toBe(0);
    expect(evaluateWorld(swapped).room_color_acc).toBe(0);
  });
});

describe('blocked moves', () => {
  const S = doc.size;
  const paint = (rgb: Uint8Array, x: number, y: number, c: readonly number[]) => rgb.set(c, 3 * (y * S + x));

  it("agree with the generator's rule on every directional pair of the truth, at walls and at obstacles", () => {
    const seen = { wall: 0, obstacle: 0, free: 0 };
    doc.clips.forEach((c, i) => {
      const scene = parseWorldPrompt(c.prompt)!;
      c.actions.forEach((a, f) => {
        if (f === 0 || a === 0) return;
        const stayed = c.positions[f][0] === c.positions[f - 1][0] && c.positions[f][1] === c.positions[f - 1][1];
        expect([i, f, moveBlocked(detectFrame(clips[i].frames[f - 1], S, S, scene), S, S, scene, a)]).toEqual([i, f, stayed]);
        const [x, y] = c.positions[f - 1],
          d = [
            [0, 0],
            [0, -1],
            [0, 1],
            [-1, 0],
            [1, 0],
          ][a],
          h = doc.agent / 2;
        const nx = x + doc.step * d[0],
          ny = y + doc.step * d[1];
        const inside = nx - h >= doc.wall && ny - h >= doc.wall && nx + h <= S - doc.wall && ny + h <= S - doc.wall;
        seen[!stayed ? 'free' : inside ? 'obstacle' : 'wall']++;
      });
    });
    expect(seen.wall).toBeGreaterThanOrEqual(2);
    expect(seen.obstacle).toBeGreaterThanOrEqual(2);
    expect(seen.free).toBeGreaterThan(20);
  });

  it('are not made by a halo of wall or other object colours around the agent', () => {
    // clip 2: a red disc in a brown room, no blocks, at (17, 40) in frame 1, every neighbouring step free; the halo is
    // the 2-px ring just outside the agent's box
    const scene = parseWorldPrompt(doc.clips[2].prompt)!;
    const rgb = Uint8Array.from(clips[2].frames[1]);
    const [cx, cy] = doc.clips[2].positions[1],
      h = doc.agent / 2;
    expect([cx, cy]).toEqual([17, 40]);
    const halo = [wallColor(ROOM_COLORS.brown), wallColor(ROOM_COLORS.gray), OBJECT_COLORS.magenta];
    for (let y = cy - h - 3; y < cy + h + 3; y++)
      for (let x = cx - h - 3; x < cx + h + 3; x++) {
        const ring = Math.max(Math.abs(x + 0.5 - cx), Math.abs(y + 0.5 - cy));
        if (ring > h && ring < h + 3) paint(rgb, x, y, halo[(x + y) % 3]);
      }
    const d = detectFrame(rgb, S, S, scene);
    expect(d.present).toBe(true);
    for (const a of [1, 2, 3, 4]) expect([a, moveBlocked(d, S, S, scene, a)]).toEqual([a, false]);
  });

  it("count the prompt's obstacle colour only as a patch, not as stray pixels", () => {
    // clip 5: a cyan dot in a gray room with an orange block, at (52, 17) in frame 0; the step left is free. The strip a
    // step left adds is x in [cx − h − step, cx − h); a patch must reach a quarter of the disc's area (π·12²/16 ≈ 28 px)
    const scene = parseWorldPrompt(doc.clips[5].prompt)!;
    const [cx, cy] = doc.clips[5].positions[0],
      h = doc.agent / 2;
    expect([cx, cy]).toEqual([52, 17]);
    const strayed = Uint8Array.from(clips[5].frames[0]);
    for (const [x, y] of [
      [cx - h - 2, cy - 3],
      [cx - h - 1, cy + 1],
      [cx - h - 2, cy + 3],
    ])
      paint(strayed, x, y, OBJECT_COLORS.orange);
    expect(moveBlocked(detectFrame(strayed, S, S, scene), S, S, scene, 3)).toBe(false);
    const patch = Uint8Array.from(clips[5].frames[0]);
    for (let y = cy - 5; y < cy + 5; y++) for (let x = cx - h - doc.step; x < cx - h; x++) paint(patch, x, y, OBJECT_COLORS.orange);
    expect(moveBlocked(detectFrame(patch, S, S, scene), S, S, scene, 3)).toBe(true);
    expect(moveBlocked(detectFrame(patch, S, S, scene), S, S, scene, 4)).toBe(false);
  });

  it('are judged at the leading edge: an agent drawn a pixel into the wall border still moves along the wall', () => {
    // a 12-px square agent painted at centre (32, 8), its top row on the wall border (y 2): up is blocked, sideways and
    // down are free
    expect(doc.agent).toBe(12);
    const scene = parseWorldPrompt('a red square in a brown room')!;
    const rgb = new Uint8Array(S * S * 3).map((_, i) => ROOM_COLORS.brown[i % 3]);
    for (let y = 2; y < 14; y++) for (let x = 26; x < 38; x++) paint(rgb, x, y, OBJECT_COLORS.red);
    const d = detectFrame(rgb, S, S, scene);
    expect(d.centroid).toEqual([32, 8]);
    expect([1, 2, 3, 4].map((a) => moveBlocked(d, S, S, scene, a))).toEqual([true, false, false, false]);
  });

  it('are none without an agent or without a direction', () => {
    const scene = parseWorldPrompt(doc.clips[2].prompt)!;
    const floor = new Uint8Array(S * S * 3).map((_, i) => ROOM_COLORS.brown[i % 3]);
    expect(moveBlocked(detectFrame(floor, S, S, scene), S, S, scene, 1)).toBe(false);
    expect(moveBlocked(detectFrame(clips[2].frames[1], S, S, scene), S, S, scene, 0)).toBe(false);
  });
});

describe('block count', () => {
  const S = doc.size;
  /** Paints the rectangle (x0, y0, x1, y1), exclusive, px, of a copy of `rgb` in colour `c`. */
  const filled = (rgb: Uint8Array, [x0, y0, x1, y1]: readonly number[], c: readonly number[]): Uint8Array => {
    const out = Uint8Array.from(rgb);
    for (let y = y0; y < y1; y++) for (let x = x0; x < x1; x++) out.set(c, 3 * (y * S + x));
    return out;
  };
  /** A `side`-px square on the floor of clip i's frame f, at least 1 px clear of its blocks and its agent's box. */
  const freeSquare = (i: number, f: number, side: number): [number, number, number, number] => {
    const c = doc.clips[i],
      h = doc.agent / 2,
      [ax, ay] = c.positions[f];
    const taken = [...c.obstacles, [ax - h, ay - h, ax + h, ay + h]];
    for (let y = doc.wall; y + side <= S - doc.wall; y++) {
      for (let x = doc.wall; x + side <= S - doc.wall; x++) {
        if (taken.every(([x0, y0, x1, y1]) => x + side < x0 || x1 < x || y + side < y0 || y1 < y)) return [x, y, x + side, y + side];
      }
    }
    throw new Error(`no free ${side}-px square in clip ${i} frame ${f}`);
  };
  const withBlocks = doc.clips.flatMap((c, i) => (c.obstacles.length > 0 ? [i] : []));

  it('a block painted over with the floor colour: one component less, and every frame fails the count', () => {
    expect(withBlocks).toHaveLength(5);
    for (const i of withBlocks) {
      const c = doc.clips[i],
        scene = parseWorldPrompt(c.prompt)!;
      const frames = clips[i].frames.map((rgb) => filled(rgb, c.obstacles[0], ROOM_COLORS[c.room]));
      frames.forEach((rgb, f) => expect([i, f, detectFrame(rgb, S, S, scene).blockComponents]).toEqual([i, f, c.obstacles.length - 1]));
      const n = frames.length;
      expect(tallyWorldClip({ ...clips[i], frames })).toMatchObject({ frames: n, colorOk: n, roomOk: n, blockFrames: n, blockOk: 0, present: n });
    }
  });

  it('an extra block painted on the floor: one component more, and every frame fails the count', () => {
    for (const i of withBlocks) {
      const c = doc.clips[i],
        scene = parseWorldPrompt(c.prompt)!;
      const frames = clips[i].frames.map((rgb, f) => filled(rgb, freeSquare(i, f, doc.block), OBJECT_COLORS[c.obstacle_color!]));
      frames.forEach((rgb, f) => expect([i, f, detectFrame(rgb, S, S, scene).blockComponents]).toEqual([i, f, c.obstacles.length + 1]));
      const n = frames.length;
      expect(tallyWorldClip({ ...clips[i], frames })).toMatchObject({ frames: n, blockFrames: n, blockOk: 0, present: n });
      expect(evaluateWorld([{ ...clips[i], frames }]).block_count_acc).toBe(0);
    }
  });

  it('counts a patch of at least a quarter of a block (25 px), not a smaller one', () => {
    // clip 1: a green ball in a brown room with a cyan block
    const c = doc.clips[1],
      scene = parseWorldPrompt(c.prompt)!;
    expect(BLOCK_AREA / 4).toBe(25);
    const at = (side: number) => detectFrame(filled(clips[1].frames[0], freeSquare(1, 0, side), OBJECT_COLORS.cyan), S, S, scene).blockComponents;
    expect(at(4)).toBe(1); // 16 px: stray pixels, not a block
    expect(at(5)).toBe(2); // 25 px
  });

  it('two blocks joined by a bridge of their colour count as one, and fail the count', () => {
    // clip 0: three red blocks, two of them side by side at y 12–22 (x 12–22 and 36–46); the agent is at (54, 16)
    const c = doc.clips[0],
      scene = parseWorldPrompt(c.prompt)!;
    expect(c.obstacles).toEqual(
      expect.arrayContaining([
        [12, 12, 22, 22],
        [36, 12, 46, 22],
      ]),
    );
    const bridged = filled(clips[0].frames[0], [22, 16, 36, 18], OBJECT_COLORS.red);
    expect(detectFrame(bridged, S, S, scene).blockComponents).toBe(c.obstacles.length - 1);
    expect(tallyWorldClip({ ...clips[0], frames: [bridged], actions: [0] })).toMatchObject({ frames: 1, blockFrames: 1, blockOk: 0 });
  });

  it('blocks drawn in another colour than the prompt names are not counted', () => {
    // clip 3: an orange box in a black room with two white blocks
    const c = doc.clips[3],
      scene = parseWorldPrompt(c.prompt)!;
    const recoloured = c.obstacles.reduce((rgb, r) => filled(rgb, r, OBJECT_COLORS.yellow), clips[3].frames[0]);
    expect(detectFrame(recoloured, S, S, scene).blockComponents).toBe(0);
  });

  it('a prompt without blocks: no block frames, block_count_acc null', () => {
    // clip 2: a red disc in a brown room; and every clip with its blocks left out of the prompt
    expect(tallyWorldClip(clips[2])).toMatchObject({ blockFrames: 0, blockOk: 0 });
    expect(evaluateWorld([clips[2]]).block_count_acc).toBeNull();
    const unnamed = clips.map((c) => ({ ...c, prompt: c.prompt.replace(/ with .*$/, '') }));
    expect(unnamed.map((c) => tallyWorldClip(c).blockFrames)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(evaluateWorld(unnamed).block_count_acc).toBeNull();
    // pooled over the frames of the clips that name blocks only: a clip without blocks neither helps nor hurts
    expect(evaluateWorld([clips[2], clips[1]]).block_count_acc).toBe(1);
  });
});

describe('world detector on noise', () => {
  it('scores low', () => {
    const rng = new Rng(3);
    const noise = clips.map((c) => ({
      ...c,
      frames: c.frames.map(() => Uint8Array.from({ length: doc.size * doc.size * 3 }, () => Math.floor(rng.uniform() * 256))),
    }));
    const r = evaluateWorld(noise);
    expect(r.frames).toBe(72);
    expect(r.prompt_color_acc).toBeLessThan(0.1);
    expect(r.room_color_acc).toBeLessThan(0.3); // about chance: noise's dominant colour is one of the 5 room colours
    expect(r.agent_present_rate).toBeLessThan(0.1);
    expect(r.block_count_acc).toBe(0); // noise holds no 25-px patch of one colour, and every prompt with blocks names one or more
  });
});

describe('per-clip counts', () => {
  it('a clip of the truth counts every frame, every directional pair and, if its prompt names blocks, every block frame; with the wrong room, no colour match; as T2V, every frame pair and the moves', () => {
    doc.clips.forEach((c, i) => {
      const frames = c.actions.length;
      const pairs = c.actions.filter((a, f) => f > 0 && a > 0).length;
      const blocks = c.obstacles.length > 0 ? frames : 0;
      const moved = c.positions.slice(1).filter((p, f) => p[0] !== c.positions[f][0] || p[1] !== c.positions[f][1]).length;
      expect(tallyWorldClip(clips[i])).toEqual({
        frames,
        colorOk: frames,
        roomOk: frames,
        blockFrames: blocks,
        blockOk: blocks,
        present: frames,
        pairs,
        followed: pairs,
        motionPairs: 0,
        moved: 0,
      });
      const wrongRoom = {
        ...clips[i],
        prompt: c.prompt.replace(/in a [a-z ]+ room/, c.prompt.includes('in a gray room') ? 'in a brown room' : 'in a gray room'),
      };
      expect(tallyWorldClip(wrongRoom)).toEqual({
        frames,
        colorOk: 0,
        roomOk: 0,
        blockFrames: blocks,
        blockOk: blocks,
        present: frames,
        pairs,
        followed: pairs,
        motionPairs: 0,
        moved: 0,
      });
      const { actions: _actions, ...t2v } = clips[i];
      expect(tallyWorldClip(t2v)).toEqual({
        frames,
        colorOk: frames,
        roomOk: frames,
        blockFrames: blocks,
        blockOk: blocks,
        present: frames,
        pairs: 0,
        followed: 0,
        motionPairs: frames - 1,
        moved,
      });
    });
  });

  it('refuses a prompt outside the grammar', () => {
    expect(() => tallyWorldClip({ ...clips[0], prompt: 'a purple ball in a dark blue room' })).toThrow(/outside the world grammar/);
  });
});

describe('frame strip', () => {
  it('lays frames side by side with white gutters, pixel-exact', () => {
    const f0 = clips[0].frames[0],
      f1 = clips[0].frames[1];
    const png = PNG.sync.read(frameStripPng([f0, f1], doc.size, doc.size, 2));
    expect([png.width, png.height]).toEqual([2 * doc.size + 2, doc.size]);
    const at = (x: number, y: number) => Array.from(png.data.subarray(4 * (y * png.width + x), 4 * (y * png.width + x) + 4));
    expect(at(10, 20)).toEqual([...f0.subarray(3 * (20 * doc.size + 10), 3 * (20 * doc.size + 10) + 3), 255]);
    expect(at(doc.size + 2 + 10, 20)).toEqual([...f1.subarray(3 * (20 * doc.size + 10), 3 * (20 * doc.size + 10) + 3), 255]);
    expect(at(doc.size, 5)).toEqual([255, 255, 255, 255]);
  });
});
