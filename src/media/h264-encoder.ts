import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { Observable, type OperatorFunction } from 'rxjs';
import { OmniError } from '../errors';
import { resolveFfmpeg } from './ffmpeg';
import { FlvVideoTagReader, type FlvVideoTag } from './flv';
import { joinAvcc, NAL_TYPE, nalType, parseAvcDecoderConfig, splitAvcc } from './nal';

/** One video frame: packed RGB24, `height × width × 3` bytes, rows top to bottom. */
export type RgbFrame = Uint8Array;

/** One encoded frame: one H.264 access unit. */
export interface EncodedFrame {
  /**
   * The access unit in AVCC form: each NAL unit prefixed by its 4-byte big-endian length (the form an MP4 sample
   * and WebCodecs with an `avcC` description take; `toAnnexB(splitAvcc(data))` gives a raw stream). Parameter sets
   * are not repeated inside; they are in {@link sps}/{@link pps}.
   */
  data: Uint8Array;
  /** True for an IDR access unit: a decoder can start here (with `sps` and `pps`). */
  keyframe: boolean;
  /** Presentation index: the 0-based position of the input frame this unit encodes (equal to the decode order). */
  pts: number;
  /** Presentation time, milliseconds: `pts × 1000 / fps`. */
  timeMs: number;
  /** The sequence parameter set NAL unit (header byte included); present on keyframes. */
  sps?: Uint8Array;
  /** The picture parameter set NAL unit; present on keyframes. */
  pps?: Uint8Array;
}

/** Options of {@link encodeH264}. */
export interface H264EncoderOptions {
  /** Frame width, pixels: even, 2–16384. */
  width: number;
  /** Frame height, pixels: even, 2–16384. */
  height: number;
  /** Frames per second, in (0, 1000]; also the rate ffmpeg stamps on its input. */
  fps: number;
  /** Frames from one keyframe to the next (x264 keyint, fixed GOP, no scene-cut keyframes). Default `2 × fps` rounded. */
  keyframeInterval?: number;
  /** x264 constant rate factor, 0–51 (lower is better). Default 23. */
  crf?: number;
  /** ffmpeg binary; resolved with `resolveFfmpeg()` (OMNIRX_FFMPEG, PATH, @ffmpeg-installer) when absent. */
  ffmpegPath?: string;
  /**
   * Frames held in Node while ffmpeg's stdin does not take more (its `write()` returned false), at most. One more
   * fails the stream (a producer must not outrun the encoder without bound). Default 64.
   */
  maxQueuedFrames?: number;
}

/** Characters of ffmpeg's stderr kept for error messages (the tail). */
const STDERR_TAIL_CHARS = 4000;

type EncoderProcess = ChildProcessByStdio<Writable, Readable, Readable>;

function invalid(param: string, message: string): OmniError {
  return new OmniError('OMNIRX_ERR_INVALID_REQUEST', `encodeH264: ${message}`, { param });
}

function checkOptions(o: H264EncoderOptions): Required<Omit<H264EncoderOptions, 'ffmpegPath'>> & { ffmpegPath?: string } {
  for (const key of ['width', 'height'] as const) {
    const v = o[key];
    if (!Number.isSafeInteger(v) || v < 2 || v > 16384 || v % 2 !== 0) throw invalid(key, `${key} must be an even integer in [2, 16384]; got ${String(v)}`);
  }
  if (typeof o.fps !== 'number' || !Number.isFinite(o.fps) || o.fps <= 0 || o.fps > 1000)
    throw invalid('fps', `fps must be a number in (0, 1000]; got ${String(o.fps)}`);
  const keyframeInterval = o.keyframeInterval ?? Math.max(1, Math.round(2 * o.fps));
  if (!Number.isSafeInteger(keyframeInterval) || keyframeInterval < 1)
    throw invalid('keyframeInterval', `keyframeInterval must be a positive integer; got ${String(keyframeInterval)}`);
  const crf = o.crf ?? 23;
  if (!Number.isInteger(crf) || crf < 0 || crf > 51) throw invalid('crf', `crf must be an integer in [0, 51]; got ${String(crf)}`);
  const maxQueuedFrames = o.maxQueuedFrames ?? 64;
  if (!Number.isSafeInteger(maxQueuedFrames) || maxQueuedFrames < 1)
    throw invalid('maxQueuedFrames', `maxQueuedFrames must be a positive integer; got ${String(maxQueuedFrames)}`);
  return {
    width: o.width,
    height: o.height,
    fps: o.fps,
    keyframeInterval,
    crf,
    maxQueuedFrames,
    ...(o.ffmpegPath === undefined ? {} : { ffmpegPath: o.ffmpegPath }),
  };
}

/** ffmpeg's `-r` value for a frame rate: integers as-is, others as a rational with denominator 1000 or 1001. */
function rateArg(fps: number): string {
  if (Number.isInteger(fps)) return String(fps);
  for (const den of [1001, 1000]) {
    const num = fps * den;
    if (Math.abs(num - Math.round(num)) < 1e-6 * den) return `${Math.round(num)}/${den}`;
  }
  return `${Math.round(fps * 1_000_000)}/1000000`;
}

/**
 * The ffmpeg command line of the live encoder: RGB24 frames on stdin, libx264 (ultrafast, zerolatency: no
 * lookahead, no B-frames, sliced threads, so each frame's access unit is written as soon as that frame is in),
 * fixed GOP, yuv420p, FLV on stdout flushed after every packet.
 */
export function h264EncoderArgs(o: { width: number; height: number; fps: number; keyframeInterval: number; crf: number }): string[] {
  const rate = rateArg(o.fps);
  return [
    '-hide_banner',
    '-loglevel',
    'error',
    '-nostdin',
    '-f',
    'rawvideo',
    '-pix_fmt',
    'rgb24',
    '-s',
    `${o.width}x${o.height}`,
    '-r',
    rate,
    '-i',
    'pipe:0',
    '-an',
    '-c:v',
    'libx264',
    '-preset',
    'ultrafast',
    '-tune',
    'zerolatency',
    '-bf',
    '0',
    '-crf',
    String(o.crf),
    '-g',
    String(o.keyframeInterval),
    '-keyint_min',
    String(o.keyframeInterval),
    '-sc_threshold',
    '0',
    '-pix_fmt',
    'yuv420p',
    '-vsync',
    'passthrough',
    '-flush_packets',
    '1',
    '-f',
    'flv',
    'pipe:1',
  ];
}

/**
 * Encodes a stream of RGB24 frames to H.264 access units with one long-lived ffmpeg process (libx264).
 *
 * Each subscription spawns its own ffmpeg. Frames are written to its stdin in order; when `write()` returns false
 * later frames wait in a queue (bounded by `maxQueuedFrames`) until `drain`. Each access unit is emitted as soon
 * as its bytes are out of ffmpeg (FLV framing, see `flv.ts`): access unit k is emitted before frame k+1 is needed,
 * about 1–2 ms after frame k is written at 64×64 (docs/streaming.md). Exactly one unit per input frame, in order.
 *
 * Completion of the source closes stdin; the stream completes when ffmpeg exits 0 after its last unit.
 * Unsubscribing kills ffmpeg (SIGKILL). A source error kills ffmpeg and is passed on.
 *
 * @throws OmniError `OMNIRX_ERR_INVALID_REQUEST` at call time for bad options, and as a stream error for a frame
 *   that is not a Uint8Array of `width × height × 3` bytes or a queue overflow; `OMNIRX_ERR_FFMPEG` as a stream
 *   error when ffmpeg cannot be found or started, exits non-zero (with its stderr tail), writes an unexpected
 *   stream, or emits a different number of units than frames.
 */
export function encodeH264(options: H264EncoderOptions): OperatorFunction<RgbFrame, EncodedFrame> {
  const o = checkOptions(options);
  const frameBytes = o.width * o.height * 3;
  return (source) =>
    new Observable<EncodedFrame>((subscriber) => {
      const queue: RgbFrame[] = [];
      const reader = new FlvVideoTagReader();
      let child: EncoderProcess | undefined;
      let stderrTail = '';
      let framesIn = 0;
      let unitsOut = 0;
      let sourceDone = false;
      let stdinBlocked = false;
      let finished = false;
      let sps: Uint8Array | undefined;
      let pps: Uint8Array | undefined;
      let lengthSize = 4;

      const fail = (err: unknown) => {
        if (finished) return;
        finished = true;
        child?.kill('SIGKILL');
        subscriber.error(err);
      };
      const tail = () => (stderrTail.trim() === '' ? '(no output on stderr)' : stderrTail.trim());

      const pump = () => {
        if (child === undefined || finished) return;
        while (!stdinBlocked && queue.length > 0) {
          const frame = queue.shift()!;
          stdinBlocked = !child.stdin.write(frame);
        }
        if (sourceDone && queue.length === 0 && !child.stdin.writableEnded) child.stdin.end();
      };

      const onTag = (tag: FlvVideoTag) => {
        if (tag.packetType === 0) {
          const config = parseAvcDecoderConfig(tag.payload);
          if (config.sps.length === 0 || config.pps.length === 0)
            throw new OmniError('OMNIRX_ERR_FFMPEG', 'ffmpeg sent an AVC sequence header without SPS or PPS');
          sps = config.sps[0]!.slice();
          pps = config.pps[0]!.slice();
          lengthSize = config.lengthSize;
          return;
        }
        if (tag.packetType !== 1) return;
        const nals = splitAvcc(tag.payload, lengthSize);
        // Parameter sets and delimiters travel beside the unit (sps/pps), never inside it.
        const picture = nals.filter((n) => {
          const t = nalType(n);
          return t !== NAL_TYPE.SPS && t !== NAL_TYPE.PPS && t !== NAL_TYPE.AUD;
        });
        const keyframe = nals.some((n) => nalType(n) === NAL_TYPE.IDR_SLICE);
        if (keyframe && (sps === undefined || pps === undefined))
          throw new OmniError('OMNIRX_ERR_FFMPEG', `ffmpeg sent keyframe ${unitsOut} before any SPS/PPS`);
        const pts = unitsOut++;
        if (pts >= framesIn) throw new OmniError('OMNIRX_ERR_FFMPEG', `ffmpeg sent access unit ${pts} but only ${framesIn} frame(s) were written`);
        const frame: EncodedFrame = { data: joinAvcc(picture), keyframe, pts, timeMs: (pts * 1000) / o.fps };
        if (keyframe) {
          frame.sps = sps;
          frame.pps = pps;
        }
        subscriber.next(frame);
      };

      const start = (bin: string) => {
        if (finished) return;
        let proc: EncoderProcess;
        try {
          proc = spawn(bin, h264EncoderArgs(o), { stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true });
        } catch (err) {
          fail(new OmniError('OMNIRX_ERR_FFMPEG', `could not start ffmpeg at ${bin}: ${String(err)}`, { cause: err }));
          return;
        }
        child = proc;
        proc.on('error', (err: NodeJS.ErrnoException) =>
          fail(new OmniError('OMNIRX_ERR_FFMPEG', `could not start ffmpeg at ${bin}: ${err.code ?? err.message}`, { cause: err })),
        );
        proc.stderr.setEncoding('utf8');
        proc.stderr.on('data', (s: string) => {
          stderrTail = (stderrTail + s).slice(-STDERR_TAIL_CHARS);
        });
        // EPIPE when ffmpeg exits early: the exit code and stderr (below) carry the real reason.
        proc.stdin.on('error', () => undefined);
        proc.stdin.on('drain', () => {
          stdinBlocked = false;
          pump();
        });
        proc.stdout.on('data', (chunk: Buffer) => {
          if (finished) return;
          try {
            for (const tag of reader.push(chunk)) onTag(tag);
          } catch (err) {
            fail(err);
          }
        });
        proc.on('close', (code, signal) => {
          if (finished) return;
          if (code !== 0) {
            fail(
              new OmniError(
                'OMNIRX_ERR_FFMPEG',
                `ffmpeg (${bin}) ${signal ? `was killed by ${signal}` : `exited with code ${code}`} after ${framesIn} frame(s) in, ${unitsOut} unit(s) out: ${tail()}`,
              ),
            );
            return;
          }
          if (unitsOut !== framesIn) {
            fail(new OmniError('OMNIRX_ERR_FFMPEG', `ffmpeg exited after ${unitsOut} access unit(s) for ${framesIn} frame(s): ${tail()}`));
            return;
          }
          finished = true;
          subscriber.complete();
        });
        pump();
      };

      const sub = source.subscribe({
        next: (frame) => {
          if (finished) return;
          if (!(frame instanceof Uint8Array) || frame.length !== frameBytes) {
            const got = frame instanceof Uint8Array ? `${frame.length} bytes` : typeof frame;
            fail(invalid('frame', `frame ${framesIn} must be a Uint8Array of ${o.width}x${o.height}x3 = ${frameBytes} bytes (RGB24); got ${got}`));
            return;
          }
          if (queue.length >= o.maxQueuedFrames) {
            fail(
              invalid(
                'maxQueuedFrames',
                `frame ${framesIn} arrived with ${queue.length} frames already waiting for ffmpeg's stdin (maxQueuedFrames ${o.maxQueuedFrames}); the producer outruns the encoder`,
              ),
            );
            return;
          }
          framesIn++;
          queue.push(frame);
          pump();
        },
        error: (err) => fail(err),
        complete: () => {
          sourceDone = true;
          pump();
        },
      });

      if (o.ffmpegPath !== undefined) start(o.ffmpegPath);
      else resolveFfmpeg().then((loc) => start(loc.path), fail);

      return () => {
        finished = true;
        sub.unsubscribe();
        if (child !== undefined && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      };
    });
}
