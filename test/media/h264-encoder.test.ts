import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { firstValueFrom, from, lastValueFrom, Subject } from 'rxjs';
import { filter, take, toArray } from 'rxjs/operators';
import { OmniError } from '../../src/errors';
import { resolveFfmpeg } from '../../src/media/ffmpeg';
import { fmp4Stream } from '../../src/media/fmp4-stream';
import { FlvVideoTagReader } from '../../src/media/flv';
import { encodeH264, type EncodedFrame } from '../../src/media/h264-encoder';
import { NAL_TYPE, nalType, splitAvcc } from '../../src/media/nal';
import { expectH264Mp4, syntheticVideo } from './helpers';

const W = 64;
const H = 64;
const FPS = 8;
const N = 24;

function framesOf(n: number): Uint8Array[] {
  const video = syntheticVideo(W, H, n, FPS);
  const size = W * H * 3;
  return Array.from({ length: n }, (_, i) => video.frames.subarray(i * size, (i + 1) * size));
}

let dir: string;
let ffmpeg: string;
beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'omnirx-h264-'));
  ffmpeg = (await resolveFfmpeg()).path;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A stand-in ffmpeg: a shell script with the given body (it receives the encoder's arguments). */
function fakeFfmpeg(name: string, body: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
  return file;
}

async function streamError(p: Promise<unknown>): Promise<OmniError> {
  const err = await p.then(
    () => {
      throw new Error('expected a stream error');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OmniError);
  return err as OmniError;
}

describe('FlvVideoTagReader', () => {
  it('returns the same tags whether the stream arrives whole or one byte at a time', () => {
    /** One FLV tag: type, 24-bit size, 24+8-bit timestamp, stream id 0, data, 32-bit PreviousTagSize. */
    const tag = (type: number, timestampMs: number, data: Buffer) => {
      const head = Buffer.alloc(11);
      head.writeUInt8(type, 0);
      head.writeUIntBE(data.length, 1, 3);
      head.writeUIntBE(timestampMs & 0xffffff, 4, 3);
      head.writeUInt8(timestampMs >>> 24, 7);
      const trailer = Buffer.alloc(4);
      trailer.writeUInt32BE(11 + data.length);
      return Buffer.concat([head, data, trailer]);
    };
    const header = Buffer.from('464c5601010000000900000000', 'hex'); // "FLV", v1, video, header size 9, PreviousTagSize0
    const script = tag(18, 0, Buffer.from('0a0b', 'hex')); // skipped
    const video = tag(9, 42, Buffer.from('1701000000' + '0000000165', 'hex')); // keyframe, AVC NALU, cts 0, one NAL unit
    const stream = Buffer.concat([header, script, video]);
    const whole = new FlvVideoTagReader().push(stream);
    expect(whole).toEqual([{ packetType: 1, keyframe: true, timestampMs: 42, compositionTimeMs: 0, payload: Uint8Array.from([0, 0, 0, 1, 0x65]) }]);
    const reader = new FlvVideoTagReader();
    const split = Array.from(stream).flatMap((b) => reader.push(Uint8Array.of(b)));
    expect(split).toEqual(whole);
  });
  it('rejects a stream that is not FLV', () => {
    expect(() => new FlvVideoTagReader().push(Buffer.from('000000016742c00ada109b0110', 'hex'))).toThrow(/not FLV: bytes 0–2 are 00 00 00/);
  });
});

describe('encodeH264 with the real ffmpeg', () => {
  it('emits one access unit per frame, keyframes every keyframeInterval frames with SPS/PPS beside them', async () => {
    const units = await lastValueFrom(
      from(framesOf(10)).pipe(encodeH264({ width: W, height: H, fps: FPS, keyframeInterval: 4, ffmpegPath: ffmpeg }), toArray()),
    );
    expect(units.map((u) => u.pts)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(units.map((u) => u.timeMs)).toEqual([0, 125, 250, 375, 500, 625, 750, 875, 1000, 1125]);
    expect(units.map((u) => u.keyframe)).toEqual([true, false, false, false, true, false, false, false, true, false]);
    for (const u of units) {
      const types = splitAvcc(u.data).map(nalType);
      expect(types).not.toContain(NAL_TYPE.SPS);
      expect(types).toContain(u.keyframe ? NAL_TYPE.IDR_SLICE : NAL_TYPE.NON_IDR_SLICE);
      expect(u.sps !== undefined).toBe(u.keyframe);
      expect(u.pps !== undefined).toBe(u.keyframe);
    }
    expect(nalType(units[0]!.sps!)).toBe(NAL_TYPE.SPS);
    expect(nalType(units[0]!.pps!)).toBe(NAL_TYPE.PPS);
  });

  it('has no hidden frame of delay: unit k is out before frame k+1 is written', async () => {
    const input = new Subject<Uint8Array>();
    const arrived = new Subject<EncodedFrame>();
    const units: EncodedFrame[] = [];
    const completed = new Promise<void>((resolve, reject) =>
      input.pipe(encodeH264({ width: W, height: H, fps: FPS, keyframeInterval: 5, ffmpegPath: ffmpeg })).subscribe({
        next: (u) => {
          units.push(u);
          arrived.next(u);
        },
        error: (e: unknown) => {
          arrived.error(e);
          reject(e);
        },
        complete: resolve,
      }),
    );
    const frames = framesOf(12);
    const unitsBeforeWrite: number[] = [];
    for (let k = 0; k < frames.length; k++) {
      unitsBeforeWrite.push(units.length);
      const unitK = firstValueFrom(arrived.pipe(filter((u) => u.pts === k)));
      input.next(frames[k]!);
      // Guard only (no timing is asserted): a one-frame delay would leave unit k waiting for frame k+1 forever.
      let guard: NodeJS.Timeout | undefined;
      await Promise.race([
        unitK,
        new Promise((_, reject) => (guard = setTimeout(() => reject(new Error(`unit ${k} did not come out before frame ${k + 1} was written`)), 20000))),
      ]);
      clearTimeout(guard);
    }
    expect(unitsBeforeWrite).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    input.complete();
    await completed;
    expect(units.map((u) => u.pts)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  });

  it('unsubscribing kills ffmpeg', async () => {
    const pidFile = path.join(dir, 'ffmpeg.pid');
    const wrapper = fakeFfmpeg('pid-ffmpeg', `echo $$ > '${pidFile}'\nexec '${ffmpeg}' "$@"`);
    const input = new Subject<Uint8Array>();
    const out = input.pipe(encodeH264({ width: W, height: H, fps: FPS, ffmpegPath: wrapper }));
    const first = firstValueFrom(out.pipe(take(1)));
    input.next(framesOf(1)[0]!);
    expect((await first).pts).toBe(0); // take(1) unsubscribed after unit 0
    const pid = Number(readFileSync(pidFile, 'utf8').trim());
    expect(pid).toBeGreaterThan(0);
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 200 && alive(); i++) await new Promise((r) => setTimeout(r, 25));
    expect(alive()).toBe(false);
  });

  it('turns ffmpeg exiting with an error into a stream error carrying its stderr tail', async () => {
    const broken = fakeFfmpeg('broken-ffmpeg', 'cat > /dev/null & echo "Unknown encoder libx264 (simulated)" >&2\nexit 3');
    const err = await streamError(lastValueFrom(from(framesOf(2)).pipe(encodeH264({ width: W, height: H, fps: FPS, ffmpegPath: broken }))));
    expect(err.code).toBe('OMNIRX_ERR_FFMPEG');
    expect(err.message).toMatch(/exited with code 3/);
    expect(err.message).toMatch(/Unknown encoder libx264 \(simulated\)/);
  });

  it('fails on a frame of the wrong size and on a binary that cannot start', async () => {
    const bad = await streamError(
      lastValueFrom(from([new Uint8Array(W * H * 3), new Uint8Array(10)]).pipe(encodeH264({ width: W, height: H, fps: FPS, ffmpegPath: ffmpeg }))),
    );
    expect(bad.code).toBe('OMNIRX_ERR_INVALID_REQUEST');
    expect(bad.message).toMatch(/frame 1 must be a Uint8Array of 64x64x3 = 12288 bytes \(RGB24\); got 10 bytes/);
    const missing = path.join(dir, 'no-such-ffmpeg');
    const err = await streamError(lastValueFrom(from(framesOf(1)).pipe(encodeH264({ width: W, height: H, fps: FPS, ffmpegPath: missing }))));
    expect(err.code).toBe('OMNIRX_ERR_FFMPEG');
    expect(err.message).toMatch(/could not start ffmpeg at .*no-such-ffmpeg: ENOENT/);
  });

  it('completes with no units when the source completes with no frames', async () => {
    const units = await lastValueFrom(from([] as Uint8Array[]).pipe(encodeH264({ width: W, height: H, fps: FPS, ffmpegPath: ffmpeg }), toArray()));
    expect(units).toEqual([]);
  });

  it('rejects bad options when the operator is made', () => {
    expect(() => encodeH264({ width: 63, height: H, fps: FPS })).toThrow(/width must be an even integer in \[2, 16384\]; got 63/);
    expect(() => encodeH264({ width: W, height: H, fps: 0 })).toThrow(/fps must be a number in \(0, 1000\]; got 0/);
    expect(() => encodeH264({ width: W, height: H, fps: FPS, keyframeInterval: 0 })).toThrow(/keyframeInterval must be a positive integer; got 0/);
  });
});

describe('fmp4Stream with the real ffmpeg', () => {
  it('init + 24 fragments form an MP4 that ffprobe counts and ffmpeg decodes close to the source', async () => {
    const frames = framesOf(N);
    const chunks = await lastValueFrom(fmp4Stream(from(frames), { width: W, height: H, fps: FPS, keyframeInterval: 8, ffmpegPath: ffmpeg }).pipe(toArray()));
    expect(chunks.map((c) => c.kind)).toEqual(['init', ...Array<string>(N).fill('fragment')]);
    const init = chunks[0]!;
    expect(init.kind === 'init' && init.codec).toMatch(/^avc1\.[0-9A-F]{6}$/);
    const fragments = chunks.slice(1).map((c) => (c.kind === 'fragment' ? [c.pts, c.keyframe] : []));
    expect(fragments).toEqual(Array.from({ length: N }, (_, i) => [i, i % 8 === 0]));

    const file = path.join(dir, 'live.mp4');
    writeFileSync(file, Buffer.concat(chunks.map((c) => c.data)));
    expectH264Mp4(file, { width: W, height: H, frames: N, fps: FPS });

    const decoded = execFileSync(ffmpeg, ['-v', 'error', '-i', file, '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'], { maxBuffer: 64 << 20 });
    expect(decoded.length).toBe(N * W * H * 3);
    for (const k of [0, 11, 23]) {
      const src = frames[k]!;
      const got = decoded.subarray(k * W * H * 3, (k + 1) * W * H * 3);
      let err = 0;
      for (let i = 0; i < src.length; i++) err += Math.abs(src[i]! - got[i]!);
      expect(err / src.length).toBeLessThan(6);
    }
  });
});
