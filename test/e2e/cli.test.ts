import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { PNG } from 'pngjs';
import { makeModelsDir } from '../helpers/tiny-model';
import { expectH264Mp4 } from '../media/helpers';

/**
 * The CLI as users run it: the compiled entry point in a child process (npm test builds dist/ first, as npm ci
 * does), the real engine, the native addon, ffmpeg, then ffprobe on the result.
 */
const ROOT = path.resolve(__dirname, '..', '..');
const CLI = path.join(ROOT, 'dist', 'src', 'cli', 'main.js');

function omnirx(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
}

describe('omnirx generate (compiled CLI, real engine, real ffmpeg)', () => {
  const out = mkdtempSync(path.join(tmpdir(), 'omnirx-cli-'));

  beforeAll(() => {
    expect(existsSync(CLI)).toBe(true);
  });

  it('writes an H.264 MP4 with the requested frames, fps and size from a seeded model', async () => {
    const modelsDir = await makeModelsDir();
    const file = path.join(out, 'tiny.mp4');
    const r = omnirx([
      'generate',
      '--models-dir',
      modelsDir,
      '--model',
      'tiny',
      '--prompt',
      'a red ball',
      '--frames',
      '5',
      '--fps',
      '10',
      '--width',
      '24',
      '--height',
      '16',
      '--steps',
      '2',
      '--seed',
      '3',
      '--out',
      file,
    ]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n').pop()).toContain(file);
    expectH264Mp4(file, { width: 24, height: 16, frames: 5, fps: 10 });
  });

  it('the embedded default model (as npm start runs it) produces a valid MP4; same seed → same bytes', () => {
    const a = path.join(out, 'default-a.mp4');
    const b = path.join(out, 'default-b.mp4');
    for (const f of [a, b]) {
      const r = omnirx(['generate', '--steps', '2', '--frames', '8', '--fps', '8', '--seed', '11', '--out', f]);
      expect(r.status).toBe(0);
    }
    expectH264Mp4(a, { width: 64, height: 64, frames: 8, fps: 8 });
    expect(readFileSync(a).equals(readFileSync(b))).toBe(true);
  });

  it("--task T2I on the embedded default model writes a PNG of the model's size; same seed → same bytes", () => {
    const [a, b] = [path.join(out, 'image-a.png'), path.join(out, 'image-b.png')];
    for (const f of [a, b]) {
      const r = omnirx(['generate', '--task', 'T2I', '--steps', '2', '--seed', '5', '--out', f]);
      expect(r.stderr).toBe('');
      expect(r.stdout.trim().split('\n').pop()).toBe(`wrote ${f} (64x64 PNG)`);
    }
    const png = PNG.sync.read(readFileSync(a));
    expect([png.width, png.height]).toEqual([64, 64]);
    expect(readFileSync(a).equals(readFileSync(b))).toBe(true);
  });

  it('--version prints the package version', () => {
    const r = omnirx(['--version']);
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toBe(JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version);
  });

  it('exits 2 with the flag and its range on a bad argument, and writes nothing', () => {
    const file = path.join(out, 'never.mp4');
    const r = omnirx(['generate', '--width', 'abc', '--out', file]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--width must be an integer in \[8, 1024\]/);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(existsSync(file)).toBe(false);
  });

  it('exits 1 naming the field when the model cannot honour a value', () => {
    const r = omnirx(['generate', '--width', '60', '--steps', '1', '--out', path.join(out, 'never2.mp4')]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/--width/);
    expect(r.stderr).toMatch(/multiple of 8/);
  });
});
