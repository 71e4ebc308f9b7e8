/**
 * The procedural world's geometry and colours (tools/train/procedural_world.py), which the detector matches frames
 * against. Mirrored by hand; test/eval/world-detector.test.ts checks it against the generator's fixture file.
 */

export type Rgb = readonly [number, number, number];

/** Frame side (px), wall thickness (px), agent step per frame (px), agent size (px), obstacle (block) side (px). */
export const WORLD_GEOMETRY = { size: 64, wall: 3, step: 3, agent: 12, block: 10 } as const;

/** Floor colours by prompt words. */
export const ROOM_COLORS: Readonly<Record<string, Rgb>> = {
  'dark blue': [30, 40, 120],
  'dark green': [25, 90, 40],
  gray: [110, 110, 110],
  black: [15, 15, 15],
  brown: [100, 60, 30],
};

/** Agent and obstacle colours by prompt words. */
export const OBJECT_COLORS: Readonly<Record<string, Rgb>> = {
  red: [225, 35, 35],
  green: [40, 205, 60],
  yellow: [235, 215, 40],
  cyan: [40, 215, 225],
  magenta: [225, 50, 205],
  white: [245, 245, 245],
  orange: [245, 140, 25],
};

/** Wall colour of a room: halfway between its floor colour and gray 160 (integer division, as the generator). */
export function wallColor(room: Rgb): Rgb {
  return [Math.floor((room[0] + 160) / 2), Math.floor((room[1] + 160) / 2), Math.floor((room[2] + 160) / 2)];
}

/** Agent nouns of the prompt grammar → drawn shape. */
export const AGENT_SHAPES: Readonly<Record<string, 'disc' | 'square'>> = {
  ball: 'disc',
  disc: 'disc',
  circle: 'disc',
  dot: 'disc',
  cube: 'square',
  square: 'square',
  box: 'square',
};

/** Unit displacement (dx, dy) in image coordinates (y down) of action ids 0 none, 1 up, 2 down, 3 left, 4 right. */
export const ACTION_DIRECTIONS: ReadonlyArray<readonly [number, number]> = [
  [0, 0],
  [0, -1],
  [0, 1],
  [-1, 0],
  [1, 0],
];

/** What a prompt of the grammar asks for. */
export interface WorldScene {
  room: string;
  agentColor: string;
  agentShape: 'disc' | 'square';
  obstacleColor?: string;
  /** Blocks the prompt names (1 for a|an, 2 for two, 3 for three); undefined when it names none. */
  obstacleCount?: number;
}

/** Obstacle count by the prompt's count word. */
const COUNT_WORDS: Readonly<Record<string, number>> = { a: 1, an: 1, two: 2, three: 3 };

/**
 * Parses a prompt of the grammar, "a|an <colour> <noun> in a <room colour> room[ with a|an|two|three <colour>
 * block(s)]" (the count word gives `obstacleCount`; "a" or "two" with either "block" or "blocks"); undefined when it
 * does not follow it or names colours outside the palette.
 */
export function parseWorldPrompt(prompt: string): WorldScene | undefined {
  const m = /^an? (\w+) (\w+) in a ([a-z ]+?) room(?: with (an?|two|three) (\w+) blocks?)?$/.exec(prompt.trim().toLowerCase());
  // own keys only: `in` would take "constructor" or "__proto__" for a colour or a noun
  if (m === null || !Object.hasOwn(OBJECT_COLORS, m[1]) || !Object.hasOwn(AGENT_SHAPES, m[2]) || !Object.hasOwn(ROOM_COLORS, m[3])) return undefined;
  if (m[5] !== undefined && !Object.hasOwn(OBJECT_COLORS, m[5])) return undefined;
  return {
    room: m[3],
    agentColor: m[1],
    agentShape: AGENT_SHAPES[m[2]],
    obstacleColor: m[5],
    obstacleCount: m[4] === undefined ? undefined : COUNT_WORDS[m[4]],
  };
}
