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
  /** Centroid (x, y) of the largest agent component (pixel centres at +0.5, so it equals the generator's agent centre). */
  centroid: [number, number] | undefined;
  /** Bounding box [x0, y0, x1, y1) of the largest agent component. */
  bbox: [number, number, number, number] | undefined;
  /** Per pixel palette index (−1 unknown), row-major [H, W]. */
  classes: Int16Array;
}

/** Nearest palette entry of every pixel of an RGB24 frame [H, W, 3], or −1 beyond COLOR_TOLERANCE. */
export function classifyPixels(rgb: Uint8Array, width: number, height: number): Int16Array {
  const out = new Int16Array(width * height);
  const tol2 = COLOR_TOLERANCE * COLOR_TOLERANCE;
  for (let i = 0; i < width * height; i++) {
    const r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
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
      const x = p % width, y = (p - x) / width;
      for (const [nx, ny] of [[x - 1, y], [x + 1, y], [x, y - 1], [x, y + 1]]) {
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
  const agentIdx = PALETTE.findIndex((p) => p.kind === 'object' && p.name === scene.agentColor);
  const mask = new Uint8Array(width * height);
  let agentPixels = 0;
  for (let i = 0; i < mask.length; i++) if (classes[i] === agentIdx) (mask[i] = 1), agentPixels++;
  const area = agentArea(scene.agentShape);
  const comps = components(mask, width, height).filter((c) => c.length >= area / 4);
  const main = comps[0];
  let centroid: [number, number] | undefined;
  let bbox: [number, number, number, number] | undefined;
  if (main !== undefined) {
    let sx = 0, sy = 0;
    bbox = [width, height, 0, 0];
    for (const p of main) {
      const x = p % width, y = (p - x) / width;
      sx += x + 0.5;
      sy += y + 0.5;
      bbox = [Math.min(bbox[0], x), Math.min(bbox[1], y), Math.max(bbox[2], x + 1), Math.max(bbox[3], y + 1)];
    }
    centroid = [sx / main.length, sy / main.length];
  }
  const present = comps.length === 1 && main.length >= 0.4 * area && main.length <= 2 * area;
  return { roomColor, agentPixels, agentComponents: comps.length, present, duplicated: comps.length > 1, centroid, bbox, classes };
}

/**
 * Whether a move of the agent (bounding box `bbox` in frame `det`) by one step in direction `action` is blocked: the
 * strip of WORLD_GEOMETRY.step pixels beyond the box in that direction leaves the image or holds a wall pixel or a
 * pixel of an object colour other than the agent's (the generator's rule: a move into a wall or obstacle is not made).
 */
export function moveBlocked(det: FrameDetection, width: number, height: number, scene: WorldScene, action: number): boolean {
  const [dx, dy] = ACTION_DIRECTIONS[action];
  if (det.bbox === undefined || (dx === 0 && dy === 0)) return false;
  const s = WORLD_GEOMETRY.step;
  const [x0, y0, x1, y1] = det.bbox;
  const sx0 = dx > 0 ? x1 : dx < 0 ? x0 - s : x0;
  const sx1 = dx > 0 ? x1 + s : dx < 0 ? x0 : x1;
  const sy0 = dy > 0 ? y1 : dy < 0 ? y0 - s : y0;
  const sy1 = dy > 0 ? y1 + s : dy < 0 ? y0 : y1;
  if (sx0 < 0 || sy0 < 0 || sx1 > width || sy1 > height) return true;
  for (let y = sy0; y < sy1; y++) {
    for (let x = sx0; x < sx1; x++) {
      const k = det.classes[y * width + x];
      if (k < 0) continue;
      const p = PALETTE[k];
      if (p.kind === 'wall' || (p.kind === 'object' && p.name !== scene.agentColor)) return true;
    }
  }
  return false;
}
