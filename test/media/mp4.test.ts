import { readFileSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync, chmodSync, statSync, symlinkSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { OmniError } from '../../src/errors';
import { FFMPEG_ENV_VAR, resolveFfmpeg } from '../../src/media/ffmpeg';
import { checkOutputPath, encodeMp4, validateVideoForMp4 } from '../../src/media/mp4';
import { expectH264Mp4, syntheticVideo } from './helpers';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const installerPath = (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;

/** Top-level MP4 box types in file order. */
function topLevelBoxes(file: string): string[] {
  const buf = readFileSync(file);
  const types: string[] = [];
  let off = 0;
  while (off + 8 <= buf.length) {
    let size = buf.readUInt32BE(off);
    const type = buf.toString('latin1', off + 4, off + 8);
    if (size === 1) size = Number(buf.readBigUInt64BE(off + 8));
    else if (size === 0) size = buf.length - off;
    types.push(type);
    if (size < 8) break;
    off += size;
  }
  return types;
}

async function expectFfmpegError(p: Promise<unknown>, ...fragments: RegExp[]): Promise<OmniError> {
  const err = await p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OmniError);
  const oe = err as OmniError;
  expect(oe.code).toBe('OMNIRX_ERR_FFMPEG');
  for (const f of fragments) expect(oe.message).toMatch(f);
  return oe;
}

describe('resolveFfmpeg', () => {
  it('finds the system ffmpeg on PATH first', async () => {
    const loc = await resolveFfmpeg();
    // This machine (and CI) has Debian's ffmpeg on PATH; without one the npm binary is used.
    expect(['path', 'ffmpeg-installer']).toContain(loc.source);
    expect(path.isAbsolute(loc.path)).toBe(true);
    expect(loc.version).not.toBe('');
  });

  it('lets OMNIRX_FFMPEG override PATH', async () => {
    const loc = await resolveFfmpeg({ env: { PATH: process.env.PATH, [FFMPEG_ENV_VAR]: installerPath } });
    expect(loc).toMatchObject({ source: 'env', path: installerPath });
  });

  it('falls back to @ffmpeg-installer/ffmpeg when PATH has no ffmpeg', async () => {
    const loc = await resolveFfmpeg({ env: { PATH: '' } });
    expect(loc).toMatchObject({ source: 'ffmpeg-installer', path: installerPath });
  });

  it('fails with every path tried when nothing works', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'omnirx-ffmpeg-'));
    try {
      // An executable named ffmpeg that is not ffmpeg.
      const fake = path.join(dir, 'ffmpeg');
      writeFileSync(fake, '#!/bin/sh\nexit 3\n');
      chmodSync(fake, 0o755);
      const err = await expectFfmpegError(
        resolveFfmpeg({
          env: { PATH: dir },
          installerPath: () => {
            throw 'Unsupported platform/architecture: test';
          },
        }),
        /no working ffmpeg found/,
        new RegExp(`${fake.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} \\(PATH\\): "-version" exited with code 3`),
        /@ffmpeg-installer\/ffmpeg: unavailable \(Unsupported platform/,
        /apt-get install ffmpeg/,
      );
      expect(err.status).toBe(500);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('treats a broken OMNIRX_FFMPEG as an error instead of falling back', async () => {
    await expectFfmpegError(
      resolveFfmpeg({ env: { PATH: process.env.PATH, [FFMPEG_ENV_VAR]: '/nonexistent/bin/ffmpeg' } }),
      /\/nonexistent\/bin\/ffmpeg \(from OMNIRX_FFMPEG\): could not start: ENOENT/,
      /fix or unset it/,
    );
  });
});

describe('encodeMp4', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'omnirx-mp4-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes an H.264 yuv420p MP4 with exactly the frames and rate given (system ffmpeg)', async () => {
    const video = syntheticVideo(64, 48, 12, 8);
    const out = path.join(dir, 'nested', 'deeper', 'clip.mp4');
    const res = await encodeMp4(video, out);
    expect(res.path).toBe(out);
    expect(res.bytes).toBeGreaterThan(500);
    expectH264Mp4(out, { width: 64, height: 48, frames: 12, fps: 8 });
    // +faststart: the moov box precedes the media data.
    const boxes = topLevelBoxes(out);
    expect(boxes[0]).toBe('ftyp');
    expect(boxes.indexOf('moov')).toBeGreaterThanOrEqual(0);
    expect(boxes.indexOf('moov')).toBeLessThan(boxes.indexOf('mdat'));
    // No temporary files left next to the output.
    expect(readdirSync(path.dirname(out))).toEqual(['clip.mp4']);
  });

  it('works with the @ffmpeg-installer binary when forced through OMNIRX_FFMPEG', async () => {
    const loc = await resolveFfmpeg({ env: { [FFMPEG_ENV_VAR]: installerPath } });
    expect(loc.source).toBe('env');
    const video = syntheticVideo(64, 48, 12, 8);
    const out = path.join(dir, 'installer.mp4');
    await encodeMp4(video, out, { ffmpegPath: loc.path });
    expectH264Mp4(out, { width: 64, height: 48, frames: 12, fps: 8 });
  });

  it('keeps a 1-frame clip and a longer odd frame count exact', async () => {
    const one = path.join(dir, 'one.mp4');
    await encodeMp4(syntheticVideo(32, 32, 1, 16), one);
    expectH264Mp4(one, { width: 32, height: 32, frames: 1, fps: 16 });
    const odd = path.join(dir, 'odd.mp4');
    await encodeMp4(syntheticVideo(48, 32, 33, 24), odd);
    expectH264Mp4(odd, { width: 48, height: 32, frames: 33, fps: 24 });
  });

  it('overwrites an existing file', async () => {
    const out = path.join(dir, 'overwrite.mp4');
    writeFileSync(out, 'not a video');
    await encodeMp4(syntheticVideo(16, 16, 4, 4), out);
    expectH264Mp4(out, { width: 16, height: 16, frames: 4, fps: 4 });
  });

  it('returns an absolute path for a relative output path', async () => {
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      const res = await encodeMp4(syntheticVideo(16, 16, 2, 2), path.join('rel', 'x.mp4'));
      expect(res.path).toBe(path.join(dir, 'rel', 'x.mp4'));
      expect(existsSync(res.path)).toBe(true);
    } finally {
      process.chdir(cwd);
    }
  });

  describe('hostile input', () => {
    it('rejects a wrong frame byte count', async () => {
      const video = syntheticVideo(64, 48, 12, 8);
      const short = { ...video, frames: video.frames.subarray(0, video.frames.length - 3) };
      await expectFfmpegError(encodeMp4(short, path.join(dir, 'bad.mp4')), /holds 110589 bytes/, /need 110592 \(F\*H\*W\*3\)/);
      const claimsMore = { ...video, numFrames: 13 };
      expect(() => validateVideoForMp4(claimsMore)).toThrow(/13 frames of 64x48 RGB24 need 119808/);
      expect(existsSync(path.join(dir, 'bad.mp4'))).toBe(false);
    });

    it('rejects odd width or height (yuv420p)', async () => {
      const video = syntheticVideo(63, 48, 2, 8);
      await expectFfmpegError(encodeMp4(video, path.join(dir, 'odd-w.mp4')), /must be even for yuv420p H\.264; got 63x48/);
      expect(() => validateVideoForMp4(syntheticVideo(64, 47, 2, 8))).toThrow(/got 64x47/);
    });

    it('rejects nonsense geometry and rates', () => {
      const v = syntheticVideo(16, 16, 2, 8);
      expect(() => validateVideoForMp4({ ...v, width: 0 })).toThrow(/width must be a positive integer/);
      expect(() => validateVideoForMp4({ ...v, numFrames: 1.5 })).toThrow(/numFrames must be a positive integer/);
      expect(() => validateVideoForMp4({ ...v, fps: Number.NaN })).toThrow(/fps must be a number/);
      expect(() => validateVideoForMp4({ ...v, fps: 0 })).toThrow(/fps must be a number/);
      expect(() => validateVideoForMp4({ ...v, frames: [1, 2, 3] as unknown as Uint8Array<ArrayBuffer> })).toThrow(/Uint8Array/);
    });

    it('reports a missing ffmpeg binary clearly', async () => {
      await expectFfmpegError(
        encodeMp4(syntheticVideo(16, 16, 2, 8), path.join(dir, 'nobin.mp4'), { ffmpegPath: '/nonexistent/ffmpeg' }),
        /could not start ffmpeg at \/nonexistent\/ffmpeg: ENOENT/,
      );
      expect(existsSync(path.join(dir, 'nobin.mp4'))).toBe(false);
    });

    it('reports a non-zero ffmpeg exit with the tail of its stderr and leaves no file', async () => {
      const fakeDir = mkdtempSync(path.join(os.tmpdir(), 'omnirx-fake-ffmpeg-'));
      try {
        // Exits at once without reading stdin: exercises the EPIPE path too.
        const fake = path.join(fakeDir, 'ffmpeg');
        writeFileSync(fake, '#!/bin/sh\necho "Unknown encoder libx264" >&2\nexit 1\n');
        chmodSync(fake, 0o755);
        const big = syntheticVideo(256, 256, 16, 8); // 3 MiB: more than a pipe buffer
        const out = path.join(dir, 'fail', 'x.mp4');
        await expectFfmpegError(encodeMp4(big, out, { ffmpegPath: fake }), /exited with code 1/, /Unknown encoder libx264/);
        expect(readdirSync(path.dirname(out))).toEqual([]);
      } finally {
        rmSync(fakeDir, { recursive: true, force: true });
      }
    });

    it('kills ffmpeg and rejects when aborted', async () => {
      const ac = new AbortController();
      const p = encodeMp4(syntheticVideo(256, 256, 64, 8), path.join(dir, 'aborted.mp4'), { signal: ac.signal });
      setTimeout(() => ac.abort(), 5);
      await expectFfmpegError(p, /aborted/);
      expect(readdirSync(dir).filter((n) => n.includes('aborted'))).toEqual([]);
    });
  });
});

describe('checkOutputPath (before any generation)', () => {
  const base = mkdtempSync(path.join(os.tmpdir(), 'omnirx-out-'));

  it('accepts a new file (creating its folder) and an existing regular file', async () => {
    await expect(checkOutputPath(path.join(base, 'a', 'b', 'new.mp4'))).resolves.toBe(path.join(base, 'a', 'b', 'new.mp4'));
    writeFileSync(path.join(base, 'old.mp4'), 'x');
    await expect(checkOutputPath(path.join(base, 'old.mp4'))).resolves.toBe(path.join(base, 'old.mp4'));
  });

  it('refuses a device such as /dev/null, a symlink, a directory, and a path under a file', async () => {
    await expect(checkOutputPath('/dev/null')).rejects.toMatchObject({ code: 'OMNIRX_ERR_OUTPUT_PATH', message: expect.stringMatching(/not a regular file/) });
    symlinkSync(path.join(base, 'old.mp4'), path.join(base, 'link.mp4'));
    await expect(checkOutputPath(path.join(base, 'link.mp4'))).rejects.toMatchObject({
      code: 'OMNIRX_ERR_OUTPUT_PATH',
      message: expect.stringMatching(/symbolic link/),
    });
    await expect(checkOutputPath(base)).rejects.toMatchObject({ code: 'OMNIRX_ERR_OUTPUT_PATH', message: expect.stringMatching(/directory/) });
    await expect(checkOutputPath(path.join(base, 'old.mp4', 'x.mp4'))).rejects.toMatchObject({ code: 'OMNIRX_ERR_OUTPUT_PATH' });
    expect(statSync('/dev/null').isCharacterDevice()).toBe(true);
  });
});
