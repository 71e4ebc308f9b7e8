/**
 * Step-level scheduling against request-level FIFO on the embedded default model, in one run: one long T2V job
 * (50 steps) starts, and a stream of short T2I jobs (4 steps) arrives while it runs. Baseline (a): the same
 * engine with `maxRunning: 1`, so whole requests run one at a time in arrival order (how today's serving stacks
 * serve). (b): the StepScheduler interleaving steps (priority, then least attained service).
 * Prints one JSON line: {"short_p95_ms_fifo", "short_p95_ms_step", "p95_ratio", "long_ms_fifo", "long_ms_step",
 * "shorts", "long_steps"}; short latency is from submission to the final event.
 * Run: npm run bench:scheduler [-- --shorts 8 --gap-ms 800 --long-steps 50 --frames 8]
 */
import { lastValueFrom, toArray } from 'rxjs';
import { Engine } from '../src/engine/engine';
import type { OmniEvent } from '../src/request/omni-event';
import { builtinFamilies } from '../src/families';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

function p95(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(0.95 * s.length) - 1)];
}

async function timed(engine: Engine, req: Parameters<Engine['generate']>[0]): Promise<number> {
  const t0 = performance.now();
  const events: OmniEvent[] = await lastValueFrom(engine.generate(req).pipe(toArray()));
  const last = events[events.length - 1];
  if (last.type !== 'final') throw new Error(`request failed: ${JSON.stringify(last)}`);
  return performance.now() - t0;
}

async function scenario(maxRunning: number, o: { shorts: number; gapMs: number; longSteps: number; frames: number }) {
  const engine = await Engine.create({ families: builtinFamilies(), maxRunning });
  // Warm up: compile the plans of both shapes so neither arm pays it.
  await timed(engine, { task: 'T2V', inputs: { prompt: 'warm' }, diffusion: { seed: 1, numInferenceSteps: 1, numFrames: o.frames } });
  await timed(engine, { task: 'T2I', inputs: { prompt: 'warm' }, diffusion: { seed: 1, numInferenceSteps: 1 } });
  // Guidance on every step (`guidanceInterval: [0, 1]`) and deterministic Euler steps (`eta: 0`), the workload
  // docs/benchmarks.md's figures were measured on.
  const long = timed(engine, {
    task: 'T2V',
    inputs: { prompt: 'a red ball in a dark blue room' },
    diffusion: { seed: 2, numInferenceSteps: o.longSteps, numFrames: o.frames, guidanceInterval: [0, 1], eta: 0 },
  });
  const shorts: Array<Promise<number>> = [];
  for (let i = 0; i < o.shorts; i++) {
    await new Promise((r) => setTimeout(r, o.gapMs));
    shorts.push(
      timed(engine, { task: 'T2I', inputs: { prompt: 'a yellow block' }, diffusion: { seed: 10 + i, numInferenceSteps: 4, guidanceInterval: [0, 1], eta: 0 } }),
    );
  }
  const [longMs, ...shortMs] = await Promise.all([long, ...shorts]);
  await engine.close();
  return { longMs, shortMs };
}

async function main(): Promise<void> {
  const o = { shorts: arg('shorts', 8), gapMs: arg('gap-ms', 800), longSteps: arg('long-steps', 50), frames: arg('frames', 8) };
  const fifo = await scenario(1, o);
  const step = await scenario(8, o);
  const a = p95(fifo.shortMs);
  const b = p95(step.shortMs);
  console.log(
    JSON.stringify({
      short_p95_ms_fifo: Math.round(a),
      short_p95_ms_step: Math.round(b),
      p95_ratio: +(a / b).toFixed(2),
      long_ms_fifo: Math.round(fifo.longMs),
      long_ms_step: Math.round(step.longMs),
      long_ratio: +(step.longMs / fifo.longMs).toFixed(3),
      shorts: o.shorts,
      long_steps: o.longSteps,
    }),
  );
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
