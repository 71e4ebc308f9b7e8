import { ACTION_DIRECTIONS, OBJECT_COLORS, ROOM_COLORS, WORLD_GEOMETRY, wallColor, type Rgb, type WorldScene } from './world-palette';

/** Largest RGB distance at which a pixel is assigned to its nearest palette colour (else "unknown"). */
export const COLOR_TOLERANCE = 60;

/** A colour the detector knows: floor, wall (derived from a floor colour) or object (agent / obstacle). */
interface PaletteEntry {
  name: string;
  kind: 'room' | 'wall' | 'object';
  rgb: Rgb;
}

const PALETTE: readonly PaletteEntry[] = [
  ...Object.entries(ROOM_COLORS).map(([name, rgb]) => ({ name, kind: 'room' as const, rgb })),
  ...Object.entries(ROOM_COLORS).map(([name, rgb]) => ({ name, kind: 'wall' as const, rgb: wallColor(rgb) })),
  ...Object.entries(OBJECT_COLORS).map(([name, rgb]) => ({ name, kind: 'object' as const, rgb })),
];

/** What the detector sees in one frame. Coordinates are pixels, x right, y down, pixel centres at +0.5. */
export interface FrameDetection {
  /** Most frequent floor colour among the pixels inside the wall border (undefined when none is recognised). */
  roomColor: string | undefined;
  /** Pixels of the prompt's agent colour. */
  agentPixels: number;
  /** 4-connected components of the agent colour with at least a quarter of the agent's area. */
  agentComponents: number;
  /** Exactly one such component, of 0.4–2× the agent's area. */
  present: boolean;
  /** More than one such component. */
  duplicated: boolean;
  /**
   * 4-connected components of the prompt's obstacle colour with at least a quarter of a block's area
   * (BLOCK_AREA / 4 = 25 px): the blocks drawn, to compare with the number the prompt names; 0 when it names none.
   */
  blockComponents: number;
  /** Centroid (x, y) of the largest agent component (pixel centres at +0.5, so it equals the generator's agent centre). */
  centroid: [number, number] | undefined;
  /** Per pixel palette index (−1 unknown), row-major [H, W]. */
  classes: Int16Array;
}

/** Nearest palette entry of every pixel of an RGB24 frame [H, W, 3], or −1 beyond COLOR_TOLERANCE. */
export function classifyPixels(rgb: Uint8Array, width: number, height: number): Int16Array {
  const out = new Int16Array(width * height);
  const tol2 = COLOR_TOLERANCE * COLOR_TOLERANCE;
  for (let i = 0; i < width * height; i++) {
    const r = rgb[3 * i],
      g = rgb[3 * i + 1],
      b = rgb[3 * i + 2];
    let best = -1;
    let bestD = tol2;
    for (let k = 0; k < PALETTE.length; k++) {
      const c = PALETTE[k].rgb;
      const d = (r - c[0]) ** 2 + (g - c[1]) ** 2 + (b - c[2]) ** 2;
      if (d <= bestD) {
        bestD = d;
        best = k;
      }
    }
    out[i] = best;
  }
  return out;
}

/** Expected agent area in pixels for a shape (disc of diameter AGENT, or AGENT² square). */
export function agentArea(shape: 'disc' | 'square'): number {
  const a = WORLD_GEOMETRY.agent;
  return shape === 'square' ? a * a : (Math.PI * a * a) / 4;
}

/** Obstacle (block) area in pixels: a WORLD_GEOMETRY.block px square. */
export const BLOCK_AREA = WORLD_GEOMETRY.block * WORLD_GEOMETRY.block;

function components(mask: Uint8Array, width: number, height: number): number[][] {
  const seen = new Uint8Array(mask.length);
  const out: number[][] = [];
  for (let s = 0; s < mask.length; s++) {
    if (!mask[s] || seen[s]) continue;
    const comp: number[] = [];
    const stack = [s];
    seen[s] = 1;
    while (stack.length) {
      const p = stack.pop()!;
      comp.push(p);
      const x = p % width,
        y = (p - x) / width;
      for (const [nx, ny] of [
        [x - 1, y],
        [x + 1, y],
        [x, y - 1],
        [x, y + 1],
      ]) {
        if (nx < 0 || ny < 0 || nx >= width || ny >= height) continue;
        const q = ny * width + nx;
        if (mask[q] && !seen[q]) {
          seen[q] = 1;
          stack.push(q);
        }
      }
    }
    out.push(comp);
  }
  return out.sort((a, b) => b.length - a.length);
}

function objectIndex(color: string): number {
  return PALETTE.findIndex((p) => p.kind === 'object' && p.name === color);
}

/** 4-connected components (pixel indices, largest first) of an object colour's pixels with at least `minPixels` each. */
function objectComponents(classes: Int16Array, width: number, height: number, color: string, minPixels: number): number[][] {
  const idx = objectIndex(color);
  const mask = new Uint8Array(width * height);
  for (let i = 0; i < mask.length; i++) if (classes[i] === idx) mask[i] = 1;
  return components(mask, width, height).filter((c) => c.length >= minPixels);
}

/** Segments one RGB24 frame [H, W, 3] against the prompt's scene (see FrameDetection). */
export function detectFrame(rgb: Uint8Array, width: number, height: number, scene: WorldScene): FrameDetection {
  const classes = classifyPixels(rgb, width, height);
  const w = WORLD_GEOMETRY.wall;
  const counts = new Map<string, number>();
  for (let y = w; y < height - w; y++) {
    for (let x = w; x < width - w; x++) {
      const k = classes[y * width + x];
      if (k >= 0 && PALETTE[k].kind === 'room') counts.set(PALETTE[k].name, (counts.get(PALETTE[k].name) ?? 0) + 1);
    }
  }
  let roomColor: string | undefined;
  for (const [name, n] of counts) if (roomColor === undefined || n > counts.get(roomColor)!) roomColor = name;
  const agentIdx = objectIndex(scene.agentColor);
  let agentPixels = 0;
  for (const k of classes) if (k === agentIdx) agentPixels++;
  const area = agentArea(scene.agentShape);
  const comps = objectComponents(classes, width, height, scene.agentColor, area / 4);
  const main = comps[0];
  let centroid: [number, number] | undefined;
  if (main !== undefined) {
    let sx = 0,
      sy = 0;
    for (const p of main) {
      const x = p % width,
        y = (p - x) / width;
      sx += x + 0.5;
      sy += y + 0.5;
    }
    centroid = [sx / main.length, sy / main.length];
  }
  const present = comps.length === 1 && main.length >= 0.4 * area && main.length <= 2 * area;
  const blockComponents = scene.obstacleColor === undefined ? 0 : objectComponents(classes, width, height, scene.obstacleColor, BLOCK_AREA / 4).length;
  return { roomColor, agentPixels, agentComponents: comps.length, present, duplicated: comps.length > 1, blockComponents, centroid, classes };
}

/**
 * Whether a move of the agent by one step in direction `action` is blocked, by the generator's rule
 * (tools/train/procedural_world.py `free`): the agent's box (WORLD_GEOMETRY.agent px square about the detected
 * centroid, rounded to whole pixels as the generator's centres are) moved by WORLD_GEOMETRY.step px would cross the
 * floor's edge in the direction of the move (the WORLD_GEOMETRY.wall px wall border) or take in an obstacle pixel: one
 * of the prompt's obstacle colour in a 4-connected component of at least a quarter of the agent's area (as agent
 * components are counted), in the strip the move adds to the box. Walls are judged by geometry and obstacles by the prompt's obstacle colour, so
 * the mid-tone halo a blurred generated agent leaves on the floor (pixels near some wall or object colour) is neither.
 * False when the frame has no agent or the action is not a direction.
 */
export function moveBlocked(det: FrameDetection, width: number, height: number, scene: WorldScene, action: number): boolean {
  const [dx, dy] = ACTION_DIRECTIONS[action];
  if (det.centroid === undefined || (dx === 0 && dy === 0)) return false;
  const { step: s, wall: w, agent: a } = WORLD_GEOMETRY;
  const x0 = Math.round(det.centroid[0]) - a / 2 + s * dx,
    y0 = Math.round(det.centroid[1]) - a / 2 + s * dy;
  // only the leading edge: a box the generator placed is inside the floor, and a generated agent drawn a pixel into
  // the wall border must not block moves along the wall
  if ((dx < 0 && x0 < w) || (dy < 0 && y0 < w) || (dx > 0 && x0 + a > width - w) || (dy > 0 && y0 + a > height - w)) return true;
  if (scene.obstacleColor === undefined) return false;
  const obstacle = new Uint8Array(width * height);
  for (const c of objectComponents(det.classes, width, height, scene.obstacleColor, agentArea(scene.agentShape) / 4)) for (const p of c) obstacle[p] = 1;
  // the strip the move adds: the moved box's last `s` columns (rows) in the direction of the move
  const sx0 = dx > 0 ? x0 + a - s : x0,
    sx1 = dx < 0 ? x0 + s : x0 + a;
  const sy0 = dy > 0 ? y0 + a - s : y0,
    sy1 = dy < 0 ? y0 + s : y0 + a;
  for (let y = sy0; y < sy1; y++) for (let x = sx0; x < sx1; x++) if (obstacle[y * width + x]) return true;
  return false;
}
