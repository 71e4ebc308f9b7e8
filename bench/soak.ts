/**
 * Soak: mixed create / cancel / SSE-disconnect / WebSocket-abort cycles against a real `omnirx serve` (the compiled
 * CLI, a child process, on the embedded default model), then checks that nothing is stuck and nothing leaked.
 *
 * Each cycle is one of four kinds, in turn: `complete` (a small video job polled to its end), `cancel` (created, then
 * DELETEd at once), `sse_disconnect` (created, its event stream read to the first step and the connection dropped;
 * the job runs on), `ws_abort` (a `/v1/stream` generation whose socket is closed abruptly after its first message).
 * Cycles run `--concurrency` at a time. Before the first measured cycle a warm-up (`--warmup`, 400 cycles) loads the
 * model, fills the caches and the job table's retention bounds; the server's resident set (VmRSS of its process) and its native bytes in use
 * (`omnirx_native_bytes_in_use` on /metrics) and its V8 heap in use (`nodejs_heap_size_used_bytes`) are read after the warm-up (baseline) and after every job has ended
 * (within `--settle-ms`), each once the server has been idle for a second.
 *
 * Prints one JSON line: `{"bench":"soak","cpu",…,"cycles","stuck_jobs","rss_ratio","native_ratio",…}` —
 * `stuck_jobs`: jobs still queued or in progress when the settle time ran out (target 0); the ratios: after ÷ before
 * (target ≤ 1.05). Run:
 *   npm run build && npm run bench:soak [-- --cycles 1000 --concurrency 4 --warmup 400]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import { cpuDescription } from './cpu';

const KINDS = ['complete', 'cancel', 'sse_disconnect', 'ws_abort'] as const;
type Kind = (typeof KINDS)[number];

/** A small job of the embedded model (32×32, one frame, 2 steps): the soak is about lifecycles, not compute. */
const JOB = { prompt: 'a white ball in a dark blue room', size: '32x32', num_frames: 1, num_inference_steps: 2 };

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isSafeInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts `omnirx serve` on a free port; resolves with the process and its base URL. */
function startServer(): Promise<{ proc: ChildProcess; base: string }> {
  const main = path.resolve(__dirname, '../src/cli/main.js');
  const proc = spawn(process.execPath, [main, 'serve', '--port', '0', '--log-level', 'warn'], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('omnirx serve did not print its address within 120 s')), 120_000);
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve({ proc, base: m[1]! });
      }
    });
    proc.once('exit', (code) => reject(new Error(`omnirx serve exited (${code}) before listening: ${out}`)));
  });
}

/** Resident set of process `pid`, bytes (VmRSS). */
function rssOf(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (m === null) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

/** The value of gauge `name` on the server's /metrics (its first sample). */
async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  if (m === null) throw new Error(`/metrics has no ${name}`);
  return Number(m[1]);
}

async function createJob(base: string): Promise<string> {
  const r = await fetch(`${base}/v1/videos`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(JOB) });
  if (r.status !== 200) throw new Error(`POST /v1/videos answered ${r.status}: ${await r.text()}`);
  return ((await r.json()) as { id: string }).id;
}

async function jobStatus(base: string, id: string): Promise<string> {
  const r = await fetch(`${base}/v1/videos/${id}`);
  return r.status === 404 ? 'gone' : ((await r.json()) as { status: string }).status;
}

/** One cycle of `kind`; resolves when its client side is done (a job it left running finishes on its own). */
async function cycle(base: string, kind: Kind): Promise<void> {
  if (kind === 'ws_abort') {
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/v1/stream`);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the WebSocket stream sent nothing within 60 s')), 60_000);
      ws.once('open', () => ws.send(JSON.stringify({ type: 'generate', request: JOB })));
      ws.once('message', () => {
        clearTimeout(timer);
        ws.terminate(); // abrupt: no close handshake
        resolve();
      });
      ws.once('error', reject);
    });
    return;
  }
  const id = await createJob(base);
  if (kind === 'cancel') {
    const r = await fetch(`${base}/v1/videos/${id}`, { method: 'DELETE' });
    if (r.status !== 200) throw new Error(`DELETE answered ${r.status}`);
  } else if (kind === 'sse_disconnect') {
    const ac = new AbortController();
    const res = await fetch(`${base}/v1/videos/${id}/events`, { signal: ac.signal });
    const reader = res.body!.getReader();
    let text = '';
    while (!/event: (step|final|error|cancelled)/.test(text)) {
      const { value, done } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString();
    }
    ac.abort();
  } else {
    for (;;) {
      const s = await jobStatus(base, id);
      if (s === 'completed') return;
      if (s !== 'queued' && s !== 'in_progress') throw new Error(`job ${id} ended ${s}`);
      await sleep(50);
    }
  }
}

/** Runs `n` cycles, `concurrency` at a time, kinds in turn; counts each kind and the failures. */
async function runCycles(base: string, n: number, concurrency: number): Promise<{ byKind: Record<Kind, number>; failures: string[] }> {
  const byKind = Object.fromEntries(KINDS.map((k) => [k, 0])) as Record<Kind, number>;
  const failures: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const kind = KINDS[next++ % KINDS.length]!;
        try {
          await cycle(base, kind);
          byKind[kind]++;
        } catch (e) {
          failures.push(`${kind}: ${(e as Error).message}`);
        }
      }
    }),
  );
  return { byKind, failures };
}

/** Every job the server lists (all pages). */
async function listJobs(base: string): Promise<Array<{ id: string; status: string }>> {
  const all: Array<{ id: string; status: string }> = [];
  let after: string | undefined;
  for (;;) {
    const page = (await (await fetch(`${base}/v1/videos?limit=100${after === undefined ? '' : `&after=${after}`}`)).json()) as {
      data: Array<{ id: string; status: string }>;
      has_more: boolean;
      last_id: string | null;
    };
    all.push(...page.data);
    if (!page.has_more || page.last_id === null) return all;
    after = page.last_id;
  }
}

/** Jobs still queued or in progress (listed, or in the engine), polled until none or `settleMs` ran out. */
async function settle(base: string, settleMs: number): Promise<number> {
  const end = Date.now() + settleMs;
  for (;;) {
    const stuck = (await listJobs(base)).filter((j) => j.status === 'queued' || j.status === 'in_progress').length;
    const ready = (await (await fetch(`${base}/ready`)).json()) as { queued?: number; running?: number };
    const inEngine = (ready.queued ?? 0) + (ready.running ?? 0);
    if ((stuck === 0 && inEngine === 0) || Date.now() > end) return Math.max(stuck, inEngine);
    await sleep(200);
  }
}

async function main(): Promise<void> {
  const cycles = arg('--cycles', 1000);
  const concurrency = arg('--concurrency', 4);
  const settleMs = arg('--settle-ms', 60_000);
  const warmup = arg('--warmup', 400);
  const { proc, base } = await startServer();
  try {
    // The warm-up also fills the server's retention bounds (256 finished job records, 64 stored MP4s by default), so
    // the baseline is the steady state a long-running server holds, not an empty job table.
    const warm = await runCycles(base, warmup, concurrency);
    if (warm.failures.length > 0) throw new Error(`warm-up failed: ${warm.failures.slice(0, 3).join('; ')}`);
    await settle(base, settleMs);
    await sleep(1000);
    const rssBefore = rssOf(proc.pid!);
    const nativeBefore = await metric(base, 'omnirx_native_bytes_in_use');
    const heapBefore = await metric(base, 'nodejs_heap_size_used_bytes');
    const t0 = performance.now();
    const { byKind, failures } = await runCycles(base, cycles, concurrency);
    const seconds = (performance.now() - t0) / 1000;
    const stuck = await settle(base, settleMs);
    await sleep(1000);
    const rssAfter = rssOf(proc.pid!);
    const nativeAfter = await metric(base, 'omnirx_native_bytes_in_use');
    const heapAfter = await metric(base, 'nodejs_heap_size_used_bytes');
    const round = (x: number) => Math.round(x * 1000) / 1000;
    console.log(
      JSON.stringify({
        bench: 'soak',
        cpu: cpuDescription(),
        cores: os.cpus().length,
        node: process.version,
        cycles,
        concurrency,
        warmup,
        by_kind: byKind,
        failures: failures.length,
        first_failures: failures.slice(0, 3),
        seconds: round(seconds),
        stuck_jobs: stuck,
        rss_before_mb: round(rssBefore / 2 ** 20),
        rss_after_mb: round(rssAfter / 2 ** 20),
        rss_ratio: round(rssAfter / rssBefore),
        native_before_bytes: nativeBefore,
        native_after_bytes: nativeAfter,
        native_ratio: nativeBefore === 0 ? (nativeAfter === 0 ? 1 : null) : round(nativeAfter / nativeBefore),
        heap_used_before_mb: round(heapBefore / 2 ** 20),
        heap_used_after_mb: round(heapAfter / 2 ** 20),
      }),
    );
  } finally {
    proc.kill('SIGTERM');
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
