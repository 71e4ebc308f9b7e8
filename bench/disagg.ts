/**
 * Monolithic vs disaggregated (Encode → Denoise → Decode as three OS processes over shm connectors) on the embedded
 * default model, in one run: a stream of T2V requests (distinct seeds and prompts, all submitted at once) goes through
 * each topology in turn, and the outputs are checked to be bit-identical.
 *
 *  - throughput_ratio: requests/s disaggregated ÷ requests/s monolithic;
 *  - p95_ratio: p95 latency monolithic ÷ p95 latency disaggregated (> 1: disaggregated is faster);
 *  - denoise_rss_mb: resident set of the Denoise stage process; mono_rss_mb: of the monolithic process after its run;
 *  - encoder_bytes_in_denoise: weight bytes of encoder components loaded in the Denoise process (0 by construction).
 *
 * Prints one JSON line (with the stage processes' RSS and weight bytes besides). Run:
 *   npm run build && npm run bench:disagg [-- --requests 6]
 */
import { lastValueFrom, toArray } from 'rxjs';
import { Engine } from '../src/engine/engine';
import { loadNative } from '../src/native/binding';
import { defaultModelsDir } from '../src/pipeline/family/catalog';
import { StageExecutor } from '../src/placement/stage-executor';
import type { StageProcesses } from '../src/placement/stage-processes';
import { TopologySchema } from '../src/placement/topology';
import type { OmniEvent } from '../src/request/omni-event';
import type { OmniRequestInput } from '../src/request/omni-request';
import { builtinFamilies } from '../src/families';

const MB = 2 ** 20;
const round = (x: number) => Math.round(x * 100) / 100;

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isSafeInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
}

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

const PROMPTS = ['a red ball in a dark blue room', 'a blue ball near a wall', 'a green box in a room', 'a yellow ball on the floor'];

/** Runs every request at once through `generate`; returns per-request latency (ms), the total wall time and the frames. */
async function stream(
  generate: (r: OmniRequestInput) => ReturnType<Engine['generate']>,
  reqs: OmniRequestInput[],
): Promise<{ latencies: number[]; wallMs: number; frames: Buffer[] }> {
  const t0 = performance.now();
  const latencies: number[] = [];
  const frames = await Promise.all(
    reqs.map(async (r) => {
      const events: OmniEvent[] = await lastValueFrom(generate(r).pipe(toArray()));
      latencies.push(performance.now() - t0);
      const last = events[events.length - 1];
      if (last.type !== 'final') throw new Error(`request failed: ${JSON.stringify(last)}`);
      const v = last.output.artifacts.video;
      if (v?.kind !== 'video') throw new Error('no video');
      return Buffer.from(v.frames);
    }),
  );
  return { latencies, wallMs: performance.now() - t0, frames };
}

async function main(): Promise<void> {
  const n = arg('--requests', 6);
  const native = loadNative();
  const modelsDir = defaultModelsDir();
  // Guidance on every step (`guidanceInterval: [0, 1]`) and deterministic Euler steps (`eta: 0`), the workload
  // docs/benchmarks.md's figures were measured on.
  const reqs: OmniRequestInput[] = Array.from({ length: n }, (_, i) => ({
    task: 'T2V',
    inputs: { prompt: PROMPTS[i % PROMPTS.length] },
    diffusion: { seed: 100 + i, guidanceInterval: [0, 1], eta: 0 },
  }));

  const engine = await Engine.create({ families: builtinFamilies(), native, modelsDir, tasks: ['T2V'] });
  await stream((r) => engine.generate(r), reqs.slice(0, 1)); // load and warm up
  const mono = await stream((r) => engine.generate(r), reqs);
  const monoRss = process.memoryUsage().rss;
  await engine.close();

  // Encode and Decode are light: one native thread each, so the Denoise process keeps the cores' thread pool.
  const topology = TopologySchema.parse({ kind: 'disaggregated', connector: 'shm', stages: { encode: { threads: 1 }, decode: { threads: 1 } } });
  const staged = await Engine.create({ families: builtinFamilies(), native, modelsDir, tasks: ['T2V'], topology });
  try {
    await stream((r) => staged.generate(r), reqs.slice(0, 1));
    const dis = await stream((r) => staged.generate(r), reqs);
    const identical = dis.frames.every((f, i) => f.equals(mono.frames[i]));
    if (!identical) throw new Error('disaggregated frames differ from monolithic frames');
    const mem = await ((staged.executor as StageExecutor).hosting as StageProcesses).memory();
    console.log(
      JSON.stringify({
        throughput_ratio: round(mono.wallMs / dis.wallMs),
        p95_ratio: round(quantile(mono.latencies, 0.95) / quantile(dis.latencies, 0.95)),
        denoise_rss_mb: round(mem.denoise.rssBytes / MB),
        mono_rss_mb: round(monoRss / MB),
        encoder_bytes_in_denoise: mem.denoise.encoderBytes,
        requests: n,
        mono_wall_ms: round(mono.wallMs),
        disagg_wall_ms: round(dis.wallMs),
        encode_rss_mb: round(mem.encode.rssBytes / MB),
        decode_rss_mb: round(mem.decode.rssBytes / MB),
        native_mb: Object.fromEntries(Object.entries(mem).map(([role, m]) => [role, round(m.nativeBytesInUse / MB)])),
        denoise_components: mem.denoise.components,
        identical,
      }),
    );
  } finally {
    await staged.close();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
