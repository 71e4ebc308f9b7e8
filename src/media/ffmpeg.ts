import { spawn } from 'node:child_process';
import { constants as fsConstants, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { OmniError } from '../errors';

/** Where a resolved ffmpeg binary came from. */
export type FfmpegSource = 'env' | 'path' | 'ffmpeg-installer';

/** A working ffmpeg binary: absolute (or as-given, for `OMNIRX_FFMPEG`) path, origin and version line. */
export interface FfmpegLocation {
  readonly path: string;
  readonly source: FfmpegSource;
  /** The version token of `ffmpeg -version` (e.g. `5.1.9-0+deb12u1`). */
  readonly version: string;
}

/** Options of {@link resolveFfmpeg}; every field defaults to the real process environment. */
export interface ResolveFfmpegOptions {
  /** Environment to read `OMNIRX_FFMPEG` and `PATH` from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /**
   * Returns the path of the binary shipped in `@ffmpeg-installer/ffmpeg`, or throws when the package (or its
   * platform binary) is unavailable. Default: `require('@ffmpeg-installer/ffmpeg').path`.
   */
  installerPath?: () => string;
  /** Time allowed for one `ffmpeg -version` probe, milliseconds. Default 15000. */
  probeTimeoutMs?: number;
}

/** Name of the environment variable that forces a specific ffmpeg binary (overrides PATH and the npm fallback). */
export const FFMPEG_ENV_VAR = 'OMNIRX_FFMPEG';

function defaultInstallerPath(): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const mod = require('@ffmpeg-installer/ffmpeg') as { path?: unknown };
  if (typeof mod.path !== 'string' || mod.path.length === 0) throw new Error('the package exports no binary path');
  return mod.path;
}

function describeError(err: unknown): string {
  // Duck-typed: errors from Node core may come from another realm (e.g. under jest), failing `instanceof Error`.
  if (typeof err === 'object' && err !== null && typeof (err as { message?: unknown }).message === 'string') {
    const { code, message } = err as { code?: unknown; message: string };
    return typeof code === 'string' ? `${code} (${message})` : message;
  }
  return String(err);
}

/**
 * Runs `<bin> -version` and resolves with the version token, or rejects with a one-line reason (spawn failure,
 * non-zero exit, timeout, output that is not ffmpeg's).
 */
export function probeFfmpeg(bin: string, timeoutMs = 15000): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let settled = false;
    let timedOut = false;
    // Our own timer: spawn's `timeout` option leaks its timer when the spawn itself fails (ENOENT).
    let timer: NodeJS.Timeout | undefined;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      fn();
    };
    let child;
    try {
      child = spawn(bin, ['-version'], { stdio: ['ignore', 'pipe', 'pipe'], windowsHide: true });
    } catch (err) {
      reject(new Error(`could not start: ${describeError(err)}`));
      return;
    }
    const proc = child;
    timer = setTimeout(() => {
      timedOut = true;
      proc.kill('SIGKILL');
    }, timeoutMs);
    timer.unref();
    proc.stdout.setEncoding('utf8');
    proc.stdout.on('data', (s: string) => {
      if (out.length < 4096) out += s;
    });
    proc.stderr.resume();
    proc.on('error', (err) => settle(() => reject(new Error(`could not start: ${describeError(err)}`))));
    proc.on('close', (code, signal) =>
      settle(() => {
        if (code !== 0) {
          reject(
            new Error(
              timedOut
                ? `"-version" did not finish within ${timeoutMs} ms`
                : signal
                  ? `"-version" was killed by ${signal}`
                  : `"-version" exited with code ${code}`,
            ),
          );
          return;
        }
        const m = /^ffmpeg version (\S+)/m.exec(out);
        if (!m) {
          reject(new Error('"-version" did not print an ffmpeg version line'));
          return;
        }
        resolve(m[1]!);
      }),
    );
  });
}

async function isExecutableFile(p: string): Promise<boolean> {
  try {
    const st = await fsp.stat(p);
    if (!st.isFile()) return false;
    await fsp.access(p, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Finds a working ffmpeg. Order: `OMNIRX_FFMPEG` (when set, it is the only candidate — a broken override is an
 * error, never silently replaced), then every `ffmpeg` on `PATH` in order, then the static binary shipped in
 * `@ffmpeg-installer/ffmpeg`. Each candidate must run `-version` successfully.
 *
 * Holds no state: callers that encode many clips may keep the returned location.
 *
 * @throws OmniError `OMNIRX_ERR_FFMPEG` listing every path tried and why each failed.
 */
export async function resolveFfmpeg(options: ResolveFfmpegOptions = {}): Promise<FfmpegLocation> {
  const env = options.env ?? process.env;
  const timeout = options.probeTimeoutMs ?? 15000;
  const tried: string[] = [];

  const override = env[FFMPEG_ENV_VAR];
  if (override !== undefined && override !== '') {
    try {
      const version = await probeFfmpeg(override, timeout);
      return { path: override, source: 'env', version };
    } catch (err) {
      tried.push(`${override} (from ${FFMPEG_ENV_VAR}): ${describeError(err)}`);
      throw notFound(tried, `${FFMPEG_ENV_VAR} is set, so no other ffmpeg was tried; fix or unset it.`);
    }
  }

  const exe = process.platform === 'win32' ? 'ffmpeg.exe' : 'ffmpeg';
  const seen = new Set<string>();
  const dirs = (env.PATH ?? env.Path ?? '').split(path.delimiter).filter((d) => d !== '');
  for (const dir of dirs) {
    const candidate = path.resolve(dir, exe);
    if (seen.has(candidate)) continue;
    seen.add(candidate);
    if (!(await isExecutableFile(candidate))) continue;
    try {
      const version = await probeFfmpeg(candidate, timeout);
      return { path: candidate, source: 'path', version };
    } catch (err) {
      tried.push(`${candidate} (PATH): ${describeError(err)}`);
    }
  }
  if (tried.length === 0) tried.push(`no executable "${exe}" in PATH (${dirs.length === 0 ? 'PATH is empty' : dirs.join(path.delimiter)})`);

  let installer: string | undefined;
  try {
    installer = (options.installerPath ?? defaultInstallerPath)();
  } catch (err) {
    tried.push(`@ffmpeg-installer/ffmpeg: unavailable (${describeError(err)})`);
  }
  if (installer !== undefined) {
    try {
      const version = await probeFfmpeg(installer, timeout);
      return { path: installer, source: 'ffmpeg-installer', version };
    } catch (err) {
      tried.push(`${installer} (@ffmpeg-installer/ffmpeg): ${describeError(err)}`);
    }
  }
  throw notFound(tried, `Install ffmpeg (e.g. \`apt-get install ffmpeg\`) or set ${FFMPEG_ENV_VAR} to an ffmpeg binary.`);
}

function notFound(tried: string[], hint: string): OmniError {
  return new OmniError('OMNIRX_ERR_FFMPEG', `no working ffmpeg found. Tried:\n${tried.map((t) => `  - ${t}`).join('\n')}\n${hint}`);
}
