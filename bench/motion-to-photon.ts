/**
 * Motion-to-photon of a WebRTC world session in headless Chromium (docs/webrtc.md, docs/benchmarks.md).
 *
 * Starts the omnirx HTTP server in-process on the embedded default model (models/omnirx-default, found via
 * OMNIRX_MODELS_DIR, ./models or the package root) with default session settings, opens `/demos/world` in Debian
 * chromium (playwright-core), waits for the video to run, then presses 40 keys (`--presses N`) 300 ms apart,
 * alternating left and right. For each press: the keydown event's page timestamp → the display time (requestVideoFrameCallback
 * `expectedDisplayTime`) of the first shown frame whose metadata carries that action's id. fps = frames shown per
 * second over the press phase.
 *
 * The same run measures a baseline on the same server code, page and pacing, with a trivial frame source (a flat
 * colour per action key, produced the moment a credit arrives) in place of the model: what the transport alone
 * costs (pacing wait, encode, RTP, decode, display). Prints one JSON line:
 * `{"motion_to_photon_ms_p50", "p95", "fps", "presses", "matched", "session_fps", "baseline": {…same…}}`.
 * `--fps N` sets the session rate of both runs (the page's `?fps=`; default 20, the session default): the credit
 * pacing grants a frame at most every 1000/N ms, so N bounds the wait for the next frame slot.
 * `--matmul-dtype bfloat16` runs the model DiT's matrix products on bf16 operands (deploy config `matmulDtype`).
 * `--presses N` (default 40) presses N keys in each run: the p95 of 40 presses is the 39th-smallest latency, so one
 * late composite moves it; 200 presses estimate it from 10 tail values.
 * Run: npm run bench:motion-to-photon [-- --fps 25] [-- --matmul-dtype bfloat16] [-- --presses 200]
 */
import { isMatmulDtype, MATMUL_DTYPES, type MatmulDtype } from '../src/native/plan-builder';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { chromium, type Browser } from 'playwright-core';
import { Observable, Subject } from 'rxjs';
import type { OmniEvent } from '../src/request/omni-event';
import { SessionActionSchema } from '../src/request/session-request';
import { parseDeployConfig } from '../src/placement/deploy-config';
import { createServer } from '../transports/server';
import type { ServedEngine } from '../transports/shared/served-engine';
import type { RtcWorld } from '../transports/webrtc/rtc-session';
import { builtinFamilies } from '../src/families';

const PRESS_SPACING_MS = 300;
const WARMUP_FRAMES = 20;

/** Headless flags plus the loopback-peer flags of ../shared/FACTS.md. */
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--autoplay-policy=no-user-gesture-required',
  '--allow-loopback-in-peer-connection',
  '--disable-features=WebRtcHideLocalIpsWithMdns',
];

/** The first of `candidates` that holds `rel`. @throws Error when none does. */
function findDir(rel: string, candidates: string[]): string {
  for (const c of candidates) if (existsSync(path.join(c, rel))) return c;
  throw new Error(`motion-to-photon: no ${rel} under ${candidates.join(', ')}`);
}

const ROOTS = [process.cwd(), path.resolve(__dirname, '..', '..'), path.resolve(__dirname, '..')];

function percentile(xs: number[], p: number): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

const round1 = (x: number | null) => (x === null ? null : Math.round(x * 10) / 10);

/**
 * A frame source with a world session's surface and no model: on each credit it emits one 1-frame chunk at once, a
 * flat colour per action key, tagged with the latest action (as a chunk samples it at its start).
 */
function trivialWorld(id: string, width: number, height: number, fps: number): RtcWorld {
  const colours: Record<string, [number, number, number]> = {
    none: [40, 40, 40],
    up: [200, 40, 40],
    down: [40, 200, 40],
    left: [40, 40, 200],
    right: [200, 200, 40],
  };
  const credits = new Subject<number>();
  let latest: { key: string; id?: string } = { key: 'none' };
  let frame = 0;
  let closed = false;
  const done = new Subject<void>();
  const events$ = new Observable<OmniEvent>((sub) => {
    sub.next({
      type: 'admitted',
      requestId: id,
      model: 'trivial',
      params: { task: 'WORLD', width, height, fps, chunkFrames: 1 },
      estimate: { steps: 0, forwards: 0 },
    });
    const c = credits.subscribe((n) => {
      for (let i = 0; i < n; i++) {
        const rgb = new Uint8Array(width * height * 3);
        const [r, g, b] = colours[latest.key] ?? colours.none!;
        for (let p = 0; p < rgb.length; p += 3) {
          rgb[p] = r;
          rgb[p + 1] = g;
          rgb[p + 2] = b;
        }
        const action = { key: latest.key, ...(latest.id !== undefined ? { id: latest.id } : {}) };
        sub.next({
          type: 'chunk',
          requestId: id,
          node: 'trivial',
          artifact: { kind: 'video', width, height, numFrames: 1, fps, frames: rgb },
          rollout: { chunk: frame, firstFrame: frame, ptsMs: (frame * 1000) / fps, action },
        });
        frame++;
      }
    });
    const d = done.subscribe(() => sub.complete());
    return () => {
      c.unsubscribe();
      d.unsubscribe();
    };
  });
  return {
    id,
    params: { sessionId: id, prompt: '', width, height, fps, seed: 0, flowShift: 1, eta: 0, initialAction: { key: 'none' }, priority: 1 },
    events$,
    actions: {
      next: (a: unknown) => {
        latest = SessionActionSchema.parse(a);
      },
      error: () => undefined,
      complete: () => undefined,
    },
    credits: { next: (n: number) => credits.next(n), error: () => undefined, complete: () => undefined },
    flush: () => undefined,
    close: () => {
      if (!closed) {
        closed = true;
        done.next();
      }
    },
    stats: () => ({ chunks: frame, creditBalance: 0, nativeBytes: 0, slabBytes: 0, closed }),
  };
}

/** An engine port serving only trivial world sessions (64×64 at `fps`, like the default model). */
function trivialEngine(fps: number): ServedEngine {
  let n = 0;
  const unsupported = () => {
    throw new Error('the trivial engine serves world sessions only');
  };
  return {
    generate: unsupported,
    listModels: () => ['trivial'],
    stats: () => ({ queued: 0, running: 0 }),
    health: () => ({ status: 'ok' }),
    models: { get: () => Promise.reject(new Error('no models')) },
    session: async () => trivialWorld(`trivial-${++n}`, 64, 64, fps),
    close: async () => undefined,
  };
}

interface RunResult {
  motion_to_photon_ms_p50: number | null;
  p95: number | null;
  fps: number | null;
  presses: number;
  matched: number;
}

async function listen(app: FastifyInstance): Promise<string> {
  await app.omnirx.engineReady;
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (addr === null || typeof addr === 'string') throw new Error('the server has no TCP address');
  return `http://127.0.0.1:${addr.port}`;
}

/** Drives one page: start, warm up, press keys, read the page's latencies and frame counts. */
async function drive(browser: Browser, origin: string, fps: number, presses: number): Promise<RunResult> {
  const page = await browser.newPage();
  try {
    await page.goto(`${origin}/demos/world?fps=${fps}`);
    await page.click('#start-button');
    await page.waitForFunction(`window.omnirxWorld?.state === "running" && window.omnirxWorld.framesShown >= ${WARMUP_FRAMES}`, undefined, {
      timeout: 120_000,
    });
    await page.evaluate('document.activeElement.blur()');
    const before = (await page.evaluate('({ n: window.omnirxWorld.framesShown, t: window.omnirxWorld.lastShownAt })')) as { n: number; t: number };
    for (let i = 0; i < presses; i++) {
      await page.keyboard.press(i % 2 === 0 ? 'ArrowLeft' : 'ArrowRight');
      await new Promise((r) => setTimeout(r, PRESS_SPACING_MS));
    }
    await new Promise((r) => setTimeout(r, 1000));
    const after = (await page.evaluate(
      '({ n: window.omnirxWorld.framesShown, t: window.omnirxWorld.lastShownAt, l: window.omnirxWorld.latencies.map((x) => x.ms) })',
    )) as { n: number; t: number; l: number[] };
    await page.evaluate('window.omnirxWorld.stop()');
    return {
      motion_to_photon_ms_p50: round1(percentile(after.l, 50)),
      p95: round1(percentile(after.l, 95)),
      fps: round1(((after.n - before.n) * 1000) / (after.t - before.t)),
      presses,
      matched: after.l.length,
    };
  } finally {
    await page.close();
  }
}

/** Writes a progress line with the seconds since the bench started to stderr (stdout holds only the result). */
function progress(t0: number, what: string): void {
  process.stderr.write(`motion-to-photon: ${((performance.now() - t0) / 1000).toFixed(1)} s ${what}\n`);
}

/**
 * Integer flag `name N` in [min, max], `fallback` when absent. Used for `--fps` (the session rate, frames per second,
 * 1–120, default 20) and `--presses` (key presses per run, 10–1000, default 40). @throws Error on a bad value.
 */
function intFlag(name: string, fallback: number, min: number, max: number): number {
  const i = process.argv.indexOf(name);
  if (i < 0) return fallback;
  const n = Number(process.argv[i + 1]);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be an integer in [${min}, ${max}], got ${process.argv[i + 1]}`);
  return n;
}

/** `--matmul-dtype float32|bfloat16` (default float32). @throws Error on a bad value. */
function matmulDtype(): MatmulDtype {
  const i = process.argv.indexOf('--matmul-dtype');
  const v = i < 0 ? 'float32' : process.argv[i + 1];
  if (!isMatmulDtype(v)) throw new Error(`--matmul-dtype must be one of ${MATMUL_DTYPES.join(', ')}; got ${JSON.stringify(v)}`);
  return v;
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const fps = intFlag('--fps', 20, 1, 120);
  const dtype = matmulDtype();
  const presses = intFlag('--presses', 40, 10, 1000);
  const modelsDir = process.env.OMNIRX_MODELS_DIR ?? path.join(findDir(path.join('models', 'omnirx-default', 'model.json'), ROOTS), 'models');
  const browser = await chromium.launch({ executablePath: process.env.OMNIRX_CHROMIUM ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
  try {
    const app = await createServer({
      families: builtinFamilies(),
      modelsDir,
      defaultModel: 'omnirx-default',
      deploy: parseDeployConfig({ schemaVersion: 1, matmulDtype: dtype }),
    });
    let model: RunResult;
    try {
      const origin = await listen(app);
      progress(t0, 'model server up');
      model = await drive(browser, origin, fps, presses);
      progress(t0, 'model run done');
    } finally {
      await app.close();
    }
    progress(t0, 'model server closed');
    const base = await createServer({ engine: trivialEngine(fps) });
    let baseline: RunResult;
    try {
      baseline = await drive(browser, await listen(base), fps, presses);
      progress(t0, 'baseline run done');
    } finally {
      await base.close();
    }
    process.stdout.write(`${JSON.stringify({ ...model, session_fps: fps, matmul_dtype: dtype, baseline })}\n`);
  } finally {
    await browser.close();
  }
}

// Exit explicitly: the native executor's threads and werift's sockets may outlive the closed servers by minutes.
main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`motion-to-photon: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
