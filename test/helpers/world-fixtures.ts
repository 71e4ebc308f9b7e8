/**
 * The procedural generator's fixture clips (test/fixtures/world, written by `/usr/bin/python3
 * tools/train/make_world_fixtures.py`): the document (geometry, palette, per clip the scene, actions and agent
 * centres) and each clip's frames, cut from its PNG strip. Shared by the detector's and the first-frame renderer's tests.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { PNG } from 'pngjs';

const DIR = path.join(__dirname, '..', 'fixtures', 'world');

/** One fixture clip as clips.json holds it. */
export interface WorldFixtureClip {
  prompt: string;
  room: string;
  agent_color: string;
  agent_shape: 'disc' | 'square';
  obstacle_color: string | null;
  /** Obstacle rectangles (x0, y0, x1, y1), exclusive, px. */
  obstacles: Array<[number, number, number, number]>;
  actions: number[];
  positions: Array<[number, number]>;
}

/** clips.json: the geometry and palette the TS side must mirror, and the clips. */
export const worldFixtures = JSON.parse(readFileSync(path.join(DIR, 'clips.json'), 'utf8')) as {
  size: number;
  wall: number;
  step: number;
  agent: number;
  block: number;
  room_colors: Record<string, number[]>;
  object_colors: Record<string, number[]>;
  wall_colors: Record<string, number[]>;
  clips: WorldFixtureClip[];
};

/** Clip i's frames: its PNG strip (frames left to right, no gutters) cut into size×size RGB24 frames [H, W, 3]. */
export function worldFixtureFrames(i: number): Uint8Array[] {
  const png = PNG.sync.read(readFileSync(path.join(DIR, `clip${i}.png`)));
  const s = worldFixtures.size;
  const out: Uint8Array[] = [];
  for (let f = 0; f < png.width / s; f++) {
    const rgb = new Uint8Array(s * s * 3);
    for (let y = 0; y < s; y++)
      for (let x = 0; x < s; x++) for (let c = 0; c < 3; c++) rgb[3 * (y * s + x) + c] = png.data[4 * (y * png.width + f * s + x) + c];
    out.push(rgb);
  }
  return out;
}
