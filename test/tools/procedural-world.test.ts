/**
 * The procedural world's spawn point (tools/train/procedural_world.py, issue 8), through its CLI as a user makes strips
 * of the data: with --spawn every scene starts the agent at the room's centre (frame 0 shows it moved by the first
 * action), keeps every obstacle off it (and as many
 * rooms with blocks as without it: a first version of the rule kept blocks an agent width away, which the room's
 * block grid never allows, and emptied every room), and keeps the colours and noun it draws without --spawn; without
 * it the start is drawn, as in the detector's fixtures (test/fixtures/world, which this flag must leave as they are).
 * Runs Debian's Python.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');
const WORLD = path.join(ROOT, 'tools', 'train', 'procedural_world.py');
const FIXTURES = path.join(ROOT, 'test', 'fixtures', 'world', 'clips.json');
const AGENT = 12; // px, the agent's side
const SIZE = 64; // px

interface Row {
  prompt: string;
  start: [number, number];
  obstacles: Array<[number, number, number, number]>;
  actions: string[];
}

/** The CLI's rows for `clips` clips from seed `seed` (one JSON object per clip on stdout). */
function clips(seed: number, count: number, extra: string[] = []): Row[] {
  const out = path.join(mkdtempSync(path.join(tmpdir(), 'omnirx-world-')), 'strip.png');
  const r = spawnSync('/usr/bin/python3', [WORLD, '--out', out, '--clips', String(count), '--frames', '2', '--seed', String(seed), ...extra], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (r.status !== 0) throw new Error(`procedural_world.py failed (${r.status}): ${r.stderr}`);
  return r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Row);
}

/** Whether two boxes (x0, y0, x1, y1), exclusive, share a pixel. */
function overlaps(a: number[], b: number[]): boolean {
  return a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
}

/** The agent's box at the spawn point, the room's centre. */
const SPAWN_BOX = [SIZE / 2 - AGENT / 2, SIZE / 2 - AGENT / 2, SIZE / 2 + AGENT / 2, SIZE / 2 + AGENT / 2];

/** What --spawn must not change: the room, agent colour and noun (the prompt up to "room") and the blocks' colour. */
const drawnWords = (prompt: string) => [prompt.slice(0, prompt.indexOf(' room') + 5), / (\w+) blocks?$/.exec(prompt)?.[1]];

describe('procedural_world.py --spawn', () => {
  const N = 300;
  let spawned: Row[], drawn: Row[];
  beforeAll(() => {
    spawned = clips(500, N, ['--spawn']);
    drawn = clips(500, N);
  });

  it('starts every agent at the room centre, with no obstacle on it', () => {
    expect(spawned).toHaveLength(N);
    for (const c of spawned) {
      expect(c.start).toEqual([SIZE / 2, SIZE / 2]);
      for (const o of c.obstacles) expect(overlaps(o, SPAWN_BOX)).toBe(false);
    }
  });

  it('leaves as many rooms with blocks as without it, some of them beside the agent', () => {
    const withBlocks = (rows: Row[]) => rows.filter((c) => c.obstacles.length > 0).length;
    expect(withBlocks(drawn)).toBeGreaterThan(N / 2);
    expect(withBlocks(spawned)).toBeGreaterThanOrEqual(0.95 * withBlocks(drawn));
    const near = [SPAWN_BOX[0] - AGENT, SPAWN_BOX[1] - AGENT, SPAWN_BOX[2] + AGENT, SPAWN_BOX[3] + AGENT];
    expect(spawned.some((c) => c.obstacles.some((o) => overlaps(o, near)))).toBe(true);
  });

  it('draws the same room, agent colour, noun and block colour as without it', () => {
    expect(spawned.map((c) => drawnWords(c.prompt))).toEqual(drawn.map((c) => drawnWords(c.prompt)));
  });

  it('without it the start is drawn (many places, obstacles anywhere), and the fixtures are its clips', () => {
    const starts = new Set(drawn.map((c) => c.start.join(',')));
    expect(starts.size).toBeGreaterThan(N / 2);
    expect(drawn.some((c) => c.obstacles.some((o) => overlaps(o, SPAWN_BOX)))).toBe(true);
    const fixtures = JSON.parse(readFileSync(FIXTURES, 'utf8')) as {
      clips: Array<{ seed: number; prompt: string; obstacles: number[][]; positions: number[][] }>;
    };
    for (const f of fixtures.clips) {
      const [c] = clips(f.seed, 1);
      expect(c.prompt).toBe(f.prompt);
      expect(c.obstacles).toEqual(f.obstacles);
    }
  });
});

describe('procedural_world.py refuses bad flags by name (exit 2, nothing written)', () => {
  const cases: Array<[string, string[], RegExp]> = [
    ['no clips', ['--clips', '0'], /--clips must be at least 1; got 0/],
    ['negative clips', ['--clips=-1'], /--clips must be at least 1; got -1/],
    ['no frames', ['--frames', '0'], /--frames must be at least 1; got 0/],
    ['negative frames', ['--frames=-3'], /--frames must be at least 1; got -3/],
    ['a negative seed', ['--seed=-1'], /--seed must not be negative .*got -1/],
    ['a non-integer seed', ['--seed', 'abc'], /--seed: invalid int value: 'abc'/],
  ];
  it.each(cases)('%s', (_name, args, message) => {
    const out = path.join(mkdtempSync(path.join(tmpdir(), 'omnirx-world-')), 'strip.png');
    const r = spawnSync('/usr/bin/python3', [WORLD, '--out', out, ...args], { encoding: 'utf8', timeout: 60_000 });
    expect(r.stderr).toMatch(message);
    expect(r.status).toBe(2);
    expect(existsSync(out)).toBe(false);
  });

  it('an --out that is a folder, not a .png, or in a folder that does not exist', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'omnirx-world-'));
    const outs: Array<[string, RegExp]> = [
      [dir, /--out must be the path of a \.png file; got /],
      [path.join(dir, 'strip.txt'), /--out must be the path of a \.png file; got .*strip\.txt/],
      [path.join(dir, 'missing', 'strip.png'), /--out: folder .*missing does not exist/],
    ];
    for (const [out, message] of outs) {
      const r = spawnSync('/usr/bin/python3', [WORLD, '--out', out], { encoding: 'utf8', timeout: 60_000 });
      expect(r.stderr).toMatch(message);
      expect(r.status).toBe(2);
    }
    expect(readdirSync(dir)).toEqual([]);
  });
});
