/**
 * Time-to-first-frame of a T2V generation streamed over `/v1/stream` (docs/streaming.md, docs/benchmarks.md).
 *
 * Starts the omnirx server in-process on the embedded default model (models/omnirx-default, found via
 * OMNIRX_MODELS_DIR, ./models or the package root) and runs the same fMP4 generation (the model's default size and
 * steps unless told otherwise) through a Node `ws` client, alternating two modes on the same server:
 *  - progressive: `decode_chunk_frames` N (default 1, `--chunk N`): the finished latents are decoded N frames at a
 *    time with the causal VAE's streaming state and each group goes to the encoder as soon as it is decoded;
 *  - baseline: `decode_chunk_frames` 0: the whole clip is decoded, then sent (what `/v1/stream` did before).
 * Rounds alternate the order (progressive first in even rounds, baseline first in odd ones) after one warm-up run of
 * each. The client grants every credit up front, so pacing never waits on it.
 *
 * Per run (times from sending `generate`): ttff_ms (the first fMP4 fragment, moof+mdat, received), denoise_ms (the
 * last `progress` message), after_denoise_ms (ttff − denoise: decode, encode and send of the first frame) and
 * total_ms (the `end` message). Prints one JSON line per run, then a summary line with the CPU model, medians of each
 * mode and the ratios baseline / progressive.
 *
 * Run: npm run build && npm run bench:ttff [-- --rounds 5] [-- --chunk 1] [-- --size 64x64] [-- --frames 16]
 *   [-- --steps 20]
 */
import { existsSync } from 'node:fs';
import { cpus } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import { builtinFamilies } from '../src/families';
import { cpuDescription } from './cpu';
import { createServer } from '../transports/server';

const ROOTS = [process.cwd(), path.resolve(__dirname, '..', '..'), path.resolve(__dirname, '..')];

function findDir(rel: string): string {
  for (const c of ROOTS) if (existsSync(path.join(c, rel))) return c;
  throw new Error(`ttff: no ${rel} under ${ROOTS.join(', ')}`);
}

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i < 0 ? undefined : process.argv[i + 1];
}

function intFlag(name: string, fallback: number | undefined, min: number, max: number): number | undefined {
  const v = flag(name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be an integer in [${min}, ${max}]; got ${JSON.stringify(v)}`);
  return n;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const k = s.length >> 1;
  return s.length % 2 === 1 ? s[k]! : (s[k - 1]! + s[k]!) / 2;
};
const round1 = (x: number): number => Math.round(x * 10) / 10;
const round2 = (x: number): number => Math.round(x * 100) / 100;

interface Run {
  ttff_ms: number;
  denoise_ms: number;
  after_denoise_ms: number;
  total_ms: number;
  frames: number;
}

/** One generation over a fresh socket; `decode` is its decode_chunk_frames. */
function generate(origin: string, request: Record<string, unknown>, decode: number): Promise<Run> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(origin.replace(/^http/, 'ws') + '/v1/stream');
    let t0 = 0;
    let binaries = 0;
    let ttff = NaN;
    let denoise = NaN;
    ws.on('error', reject);
    ws.on('open', () => {
      t0 = performance.now();
      ws.send(JSON.stringify({ type: 'generate', decode_chunk_frames: decode, request }));
      ws.send(JSON.stringify({ type: 'credit', frames: 64 }));
    });
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      const t = performance.now() - t0;
      if (isBinary) {
        binaries++;
        // The init segment, then one moof+mdat per frame; keep the grant topped up for long clips.
        if (binaries === 2) ttff = t;
        if (binaries > 1) ws.send(JSON.stringify({ type: 'credit', frames: 1 }));
        return;
      }
      const m = JSON.parse(data.toString('utf8')) as { type: string; frames?: number; message?: string };
      if (m.type === 'progress') denoise = t;
      else if (m.type === 'error') reject(new Error(`ttff: ${m.message}`));
      else if (m.type === 'end') {
        ws.close();
        resolve({ ttff_ms: round1(ttff), denoise_ms: round1(denoise), after_denoise_ms: round1(ttff - denoise), total_ms: round1(t), frames: m.frames ?? 0 });
      }
    });
  });
}

function summary(runs: Run[]): Record<string, number> {
  return {
    ttff_ms: round1(median(runs.map((r) => r.ttff_ms))),
    after_denoise_ms: round1(median(runs.map((r) => r.after_denoise_ms))),
    denoise_ms: round1(median(runs.map((r) => r.denoise_ms))),
    total_ms: round1(median(runs.map((r) => r.total_ms))),
  };
}

async function main(): Promise<void> {
  const rounds = intFlag('--rounds', 5, 1, 100)!;
  const chunk = intFlag('--chunk', 1, 1, 256)!;
  const frames = intFlag('--frames', undefined, 1, 256);
  const steps = intFlag('--steps', undefined, 1, 200);
  const size = flag('--size');
  const request: Record<string, unknown> = { prompt: 'a red ball in a blue room', seed: 7 };
  if (size !== undefined) request.size = size;
  if (frames !== undefined) request.num_frames = frames;
  if (steps !== undefined) request.num_inference_steps = steps;
  const modelsDir = process.env.OMNIRX_MODELS_DIR ?? path.join(findDir(path.join('models', 'omnirx-default', 'model.json')), 'models');
  const app = await createServer({ families: builtinFamilies(), modelsDir, defaultModel: 'omnirx-default' });
  try {
    await app.omnirx.engineReady;
    await app.listen({ host: '127.0.0.1', port: 0 });
    const addr = app.server.address();
    if (addr === null || typeof addr === 'string') throw new Error('the server has no TCP address');
    const origin = `http://127.0.0.1:${addr.port}`;
    const modes = { progressive: chunk, baseline: 0 } as const;
    // Warm-up: model load, plans of both decode paths, ffmpeg.
    await generate(origin, request, modes.progressive);
    await generate(origin, request, modes.baseline);
    const runs: Record<keyof typeof modes, Run[]> = { progressive: [], baseline: [] };
    for (let round = 0; round < rounds; round++) {
      const order: Array<keyof typeof modes> = round % 2 === 0 ? ['progressive', 'baseline'] : ['baseline', 'progressive'];
      for (const mode of order) {
        const r = await generate(origin, request, modes[mode]);
        runs[mode].push(r);
        console.log(JSON.stringify({ mode, round, decode_chunk_frames: modes[mode], ...r }));
      }
    }
    const p = summary(runs.progressive);
    const b = summary(runs.baseline);
    console.log(
      JSON.stringify({
        cpu: cpuDescription(),
        cores: cpus().length,
        node: process.version,
        model: 'omnirx-default',
        request,
        frames: runs.progressive[0]?.frames,
        rounds,
        progressive: { decode_chunk_frames: chunk, ...p },
        baseline: { decode_chunk_frames: 0, ...b },
        ttff_ratio: round2(b.ttff_ms! / p.ttff_ms!),
        after_denoise_ratio: round2(b.after_denoise_ms! / p.after_denoise_ms!),
        total_ratio: round2(b.total_ms! / p.total_ms!),
      }),
    );
  } finally {
    await app.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
