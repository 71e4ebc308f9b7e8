import { Rng } from '../../src/util/rng';
import { OBJECT_COLORS, ROOM_COLORS, WORLD_GEOMETRY, parseWorldPrompt, wallColor, type WorldScene } from './world-palette';

/** Rectangle (x0, y0, x1, y1) in pixels, exclusive at x1 and y1. */
export type Rect = readonly [number, number, number, number];

/** A scene of the procedural world laid out: what the prompt asks for, the blocks' rectangles and the agent's centre (px). */
export interface WorldLayout {
  scene: WorldScene;
  obstacles: readonly Rect[];
  agent: readonly [number, number];
}

/** Where `layoutWorldScene` starts the agent: the world's spawn point (the room's centre) or a free place away from it. */
export type AgentStart = 'spawn' | 'off-centre';

/** The world's spawn point (px), the room's centre (procedural_world.SPAWN). */
export const SPAWN: readonly [number, number] = [WORLD_GEOMETRY.size / 2, WORLD_GEOMETRY.size / 2];

/** Least distance (px, the larger of |Δx| and |Δy|) of an 'off-centre' start from the spawn point: one and a half agent widths. */
export const OFF_CENTRE_MIN = 12;

/** The agent's bounding box for centre (x, y): [x − agent/2, x + agent/2) on both axes (procedural_world.agent_box). */
export function agentBox(x: number, y: number): Rect {
  const h = WORLD_GEOMETRY.agent / 2;
  return [x - h, y - h, x + h, y + h];
}

const overlaps = (a: Rect, b: Rect): boolean => a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];

/** Whether the agent may stand at centre (x, y): on the floor (inside the wall border) and on no block (procedural_world.free). */
export function agentFits(obstacles: readonly Rect[], x: number, y: number): boolean {
  const { size, wall } = WORLD_GEOMETRY;
  const box = agentBox(x, y);
  if (box[0] < wall || box[1] < wall || box[2] > size - wall || box[3] > size - wall) return false;
  return !obstacles.some((r) => overlaps(box, r));
}

/**
 * Lays out a prompt's scene as the generator would draw one (tools/train/procedural_world.py `sample_scene`, with its
 * rules but its own random stream, so not the generator's scenes): as many blocks as the prompt names, on the 4-px grid
 * inside the floor, each an agent width and a pixel clear of the others and none over the spawn point's agent box;
 * then the agent at the spawn point, or ('off-centre') at a free place at least OFF_CENTRE_MIN px from it.
 * Deterministic in (prompt, seed).
 * @param seed unsigned 32-bit integer
 * @throws RangeError for a seed that is not an unsigned 32-bit integer; Error when the prompt is outside the world
 *   grammar (`parseWorldPrompt`), naming it
 */
export function layoutWorldScene(prompt: string, seed: number, start: AgentStart): WorldLayout {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new RangeError(`world layout: seed must be an unsigned 32-bit integer; got ${seed}`);
  const scene = parseWorldPrompt(prompt);
  if (scene === undefined) throw new Error(`world layout: prompt outside the world grammar: "${prompt}"`);
  const { size, wall, agent, block } = WORLD_GEOMETRY;
  const rng = new Rng(seed);
  const pick = (lo: number, hi: number) => lo + (rng.nextU32() % (hi - lo)); // integer in [lo, hi)
  // the generator's grid: x0 = 4·k for k in [wall/4 + 3, (size − wall − block)/4 − 2); three blocks always fit
  const kLo = Math.floor(wall / 4) + 3,
    kHi = Math.floor((size - wall - block) / 4) - 2;
  const spawnBox = agentBox(SPAWN[0], SPAWN[1]);
  const want = scene.obstacleCount ?? 0;
  let obstacles: Rect[] = [];
  // as the generator, at most 50 draws; where they place fewer blocks than the prompt names (early blocks can leave
  // no room), start over, so the frame always shows what the prompt says
  for (let draws = 1; obstacles.length < want; draws++) {
    if (draws > 50) {
      obstacles = [];
      draws = 1;
    }
    const x0 = 4 * pick(kLo, kHi),
      y0 = 4 * pick(kLo, kHi);
    const rect: Rect = [x0, y0, x0 + block, y0 + block];
    const grown: Rect = [x0 - agent - 1, y0 - agent - 1, x0 + block + agent + 1, y0 + block + agent + 1];
    if (!obstacles.some((r) => overlaps(grown, r)) && !overlaps(rect, spawnBox)) obstacles.push(rect);
  }
  if (start === 'spawn') return { scene, obstacles, agent: SPAWN };
  const lo = wall + agent / 2,
    hi = size - wall - agent / 2 + 1;
  for (;;) {
    const x = pick(lo, hi),
      y = pick(lo, hi);
    if (agentFits(obstacles, x, y) && Math.max(Math.abs(x - SPAWN[0]), Math.abs(y - SPAWN[1])) >= OFF_CENTRE_MIN) return { scene, obstacles, agent: [x, y] };
  }
}

/**
 * Draws a layout as the generator draws a frame (procedural_world.py `render`): RGB24 [size, size, 3] uint8 — wall
 * colour, the floor inside the wall border, the blocks, then the agent, an agent-px square or a disc of that diameter
 * (pixel centres at +0.5 inside the radius). test/eval/world-first-frame.test.ts checks it byte for byte against the
 * generator's fixture frames.
 */
export function renderWorldFrame(layout: WorldLayout): Uint8Array<ArrayBuffer> {
  const { size, wall, agent } = WORLD_GEOMETRY;
  const out = new Uint8Array(size * size * 3);
  const fill = (r: Rect, rgb: readonly number[], inside: (x: number, y: number) => boolean = () => true) => {
    for (let y = Math.max(0, r[1]); y < Math.min(size, r[3]); y++) {
      for (let x = Math.max(0, r[0]); x < Math.min(size, r[2]); x++) if (inside(x, y)) out.set(rgb, 3 * (y * size + x));
    }
  };
  const room = ROOM_COLORS[layout.scene.room];
  fill([0, 0, size, size], wallColor(room));
  fill([wall, wall, size - wall, size - wall], room);
  if (layout.scene.obstacleColor !== undefined) for (const r of layout.obstacles) fill(r, OBJECT_COLORS[layout.scene.obstacleColor]);
  const [cx, cy] = layout.agent;
  const radius2 = (agent / 2) ** 2;
  const disc = layout.scene.agentShape === 'disc';
  fill(agentBox(cx, cy), OBJECT_COLORS[layout.scene.agentColor], (x, y) => !disc || (x + 0.5 - cx) ** 2 + (y + 0.5 - cy) ** 2 <= radius2);
  return out;
}
