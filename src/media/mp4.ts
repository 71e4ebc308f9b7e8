import { spawn } from 'node:child_process';
import { constants as fsConstants, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { OmniError } from '../errors';
import type { VideoArtifact } from '../request/artifacts';
import { resolveFfmpeg } from './ffmpeg';

/** Options of {@link encodeMp4}. */
export interface EncodeMp4Options {
  /** ffmpeg binary to run; resolved with `resolveFfmpeg()` (OMNIRX_FFMPEG, PATH, @ffmpeg-installer) when absent. */
  ffmpegPath?: string;
  /** Aborting kills ffmpeg and rejects; no partial file is left behind. */
  signal?: AbortSignal;
  /** x264 preset. Default `veryfast` (small clips encode in milliseconds at any preset; this keeps large ones quick). */
  preset?: string;
  /** x264 constant rate factor, 0–51 (lower is better). Default 18 (visually lossless for generated clips). */
  crf?: number;
}

/** What {@link encodeMp4} wrote. */
export interface EncodeMp4Result {
  /** Absolute path of the MP4 file. */
  path: string;
  /** Size of the file, bytes. */
  bytes: number;
}

/** Bytes of ffmpeg's stderr kept for error messages (the tail). */
const STDERR_TAIL_CHARS = 4000;

/**
 * Checks that `video` can be encoded as yuv420p H.264: positive integer sizes, even width and height (4:2:0
 * chroma subsampling), positive finite fps, and `frames.length === numFrames × height × width × 3`.
 *
 * @throws OmniError `OMNIRX_ERR_FFMPEG` naming the offending field.
 */
export function validateVideoForMp4(video: VideoArtifact): void {
  const fail = (msg: string): never => {
    throw new OmniError('OMNIRX_ERR_FFMPEG', `cannot encode video artifact as MP4: ${msg}`);
  };
  if (video === null || typeof video !== 'object') fail('not a video artifact');
  const { width, height, numFrames, fps, frames } = video;
  for (const [name, v] of [
    ['width', width],
    ['height', height],
    ['numFrames', numFrames],
  ] as const) {
    if (!Number.isSafeInteger(v) || v <= 0) fail(`${name} must be a positive integer; got ${String(v)}`);
  }
  if (width % 2 !== 0 || height % 2 !== 0) {
    fail(`width and height must be even for yuv420p H.264; got ${width}x${height}`);
  }
  if (typeof fps !== 'number' || !Number.isFinite(fps) || fps <= 0 || fps > 1000) fail(`fps must be a number in (0, 1000]; got ${String(fps)}`);
  if (!(frames instanceof Uint8Array)) fail('frames must be a Uint8Array of packed RGB24 [F, H, W, 3]');
  const expected = numFrames * height * width * 3;
  if (frames.length !== expected) {
    fail(`frames holds ${frames.length} bytes; ${numFrames} frames of ${width}x${height} RGB24 need ${expected} (F*H*W*3)`);
  }
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
 * Checks that `outPath` can take an MP4 before any work is spent on it: the target must be absent or a regular
 * file (never a directory, a device such as /dev/null, a socket or a symlink — the encoder renames a finished
 * temporary file over the target, which would replace them), and its folder must be creatable and writable.
 * Creates the folder. Returns the absolute path.
 * @throws OmniError OMNIRX_ERR_OUTPUT_PATH naming the path and the reason.
 */
export async function checkOutputPath(outPath: string): Promise<string> {
  if (typeof outPath !== 'string' || outPath.length === 0) throw new OmniError('OMNIRX_ERR_OUTPUT_PATH', 'the output path is empty');
  const abs = path.resolve(outPath);
  const st = await fsp
    .lstat(abs)
    .catch((e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? undefined : Promise.reject(e)))
    .catch((e: NodeJS.ErrnoException) => {
      throw new OmniError('OMNIRX_ERR_OUTPUT_PATH', `cannot use ${abs}: ${e.code ?? e.message}`, { cause: e });
    });
  if (st !== undefined && !st.isFile()) {
    const what = st.isDirectory() ? 'a directory' : st.isSymbolicLink() ? 'a symbolic link' : 'not a regular file (a device, socket or pipe)';
    throw new OmniError('OMNIRX_ERR_OUTPUT_PATH', `refusing to write ${abs}: it is ${what}`);
  }
  const dir = path.dirname(abs);
  try {
    await fsp.mkdir(dir, { recursive: true });
    await fsp.access(dir, fsConstants.W_OK);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw new OmniError(
      'OMNIRX_ERR_OUTPUT_PATH',
      `cannot write into ${dir}: ${err.code === 'EACCES' ? 'permission denied' : err.code === 'EEXIST' || err.code === 'ENOTDIR' ? 'a path component is a file, not a directory' : (err.code ?? err.message)}`,
      { cause: e },
    );
  }
  return abs;
}

/**
 * Encodes an RGB24 video artifact as an H.264 (libx264, yuv420p) MP4 with `+faststart`, exactly
 * `video.numFrames` frames at `video.fps` frames per second, so duration = numFrames / fps seconds.
 *
 * Spawns ffmpeg (no shell) and streams the raw frames on its stdin. The file is written next to `outPath` under a
 * temporary name and renamed when ffmpeg succeeds, so a failure never leaves a truncated MP4; the output directory
 * is created when missing.
 *
 * @param video frames `[F, H, W, 3]` uint8, even width and height.
 * @param outPath destination file (relative paths resolve against the working directory); overwritten.
 * @returns the absolute path and the size in bytes of the written file.
 * @throws OmniError `OMNIRX_ERR_OUTPUT_PATH` when the target is not a regular file or its folder is not writable
 *   (see `checkOutputPath`); `OMNIRX_ERR_FFMPEG` when the artifact is malformed, ffmpeg cannot be found or started,
 *   exits non-zero (the message carries the tail of its stderr), or the signal aborts the encode.
 */
export async function encodeMp4(video: VideoArtifact, outPath: string, options: EncodeMp4Options = {}): Promise<EncodeMp4Result> {
  validateVideoForMp4(video);
  if (typeof outPath !== 'string' || outPath.length === 0) throw new OmniError('OMNIRX_ERR_FFMPEG', 'encodeMp4 needs a non-empty output path');
  const crf = options.crf ?? 18;
  if (!Number.isInteger(crf) || crf < 0 || crf > 51) throw new OmniError('OMNIRX_ERR_FFMPEG', `crf must be an integer in [0, 51]; got ${crf}`);
  if (options.signal?.aborted) throw new OmniError('OMNIRX_ERR_FFMPEG', `encoding ${outPath} was aborted`, { cause: options.signal.reason });

  const absOut = await checkOutputPath(outPath);
  const ffmpeg = options.ffmpegPath ?? (await resolveFfmpeg()).path;
  const tmpOut = path.join(path.dirname(absOut), `.${path.basename(absOut)}.${process.pid}.${Date.now().toString(36)}.partial`);

  const { width, height, numFrames, fps, frames } = video;
  const rate = rateArg(fps);
  const args = [
    '-hide_banner',
    '-loglevel',
    'error',
    '-y',
    '-f',
    'rawvideo',
    '-pix_fmt',
    'rgb24',
    '-s',
    `${width}x${height}`,
    '-r',
    rate,
    '-i',
    '-',
    '-an',
    '-c:v',
    'libx264',
    '-preset',
    options.preset ?? 'veryfast',
    '-crf',
    String(crf),
    '-pix_fmt',
    'yuv420p',
    '-r',
    rate,
    '-frames:v',
    String(numFrames),
    '-movflags',
    '+faststart',
    '-f',
    'mp4',
    tmpOut,
  ];

  try {
    await runFfmpeg(ffmpeg, args, Buffer.from(frames.buffer, frames.byteOffset, frames.byteLength), absOut, options.signal);
    await fsp.rename(tmpOut, absOut);
  } catch (err) {
    await fsp.rm(tmpOut, { force: true }).catch(() => undefined);
    throw err;
  }
  const st = await fsp.stat(absOut);
  return { path: absOut, bytes: st.size };
}

function runFfmpeg(bin: string, args: string[], input: Buffer, target: string, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let stderrTail = '';
    let stdinError: NodeJS.ErrnoException | undefined;
    let settled = false;
    const settle = (err?: Error) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve();
    };
    const tail = () => (stderrTail.trim() === '' ? '(no output on stderr)' : stderrTail.trim());

    const child = spawn(bin, args, { stdio: ['pipe', 'ignore', 'pipe'], windowsHide: true });
    const onAbort = () => {
      child.kill('SIGKILL');
      settle(new OmniError('OMNIRX_ERR_FFMPEG', `encoding ${target} was aborted`, { cause: signal?.reason }));
    };
    if (signal) {
      if (signal.aborted) {
        onAbort();
        return;
      }
      signal.addEventListener('abort', onAbort, { once: true });
    }

    child.on('error', (err: NodeJS.ErrnoException) => {
      settle(new OmniError('OMNIRX_ERR_FFMPEG', `could not start ffmpeg at ${bin}: ${err.code ?? ''} ${err.message}`.replace(/\s+/g, ' '), { cause: err }));
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (s: string) => {
      stderrTail = (stderrTail + s).slice(-STDERR_TAIL_CHARS);
    });
    // ffmpeg may exit (bad arguments, missing encoder) before reading all input: EPIPE / ECONNRESET on stdin is
    // expected then, and the exit code below carries the real failure.
    child.stdin.on('error', (err: NodeJS.ErrnoException) => {
      stdinError = err;
    });
    child.on('close', (code, sig) => {
      if (code === 0) {
        settle();
        return;
      }
      const how = sig ? `was killed by ${sig}` : `exited with code ${code}`;
      const pipe = stdinError ? ` (stdin: ${stdinError.code ?? stdinError.message})` : '';
      settle(new OmniError('OMNIRX_ERR_FFMPEG', `ffmpeg (${bin}) ${how} while encoding ${target}${pipe}: ${tail()}`));
    });
    child.stdin.end(input);
  });
}
