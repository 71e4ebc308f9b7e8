/**
 * Event-loop responsiveness while a generation runs on the embedded default model: the delay histogram of
 * `perf_hooks.monitorEventLoopDelay` during the run, beside the same histogram on an idle process (the baseline),
 * in one run. Prints one JSON line: {"gen_p50_ms", "gen_p99_ms", "gen_max_ms", "idle_p99_ms", "p99_ratio",
 * "steps", "gen_ms"}. The first generation (plan compilation, weight packing) is a warm-up and not measured.
 * Run: npm run bench:event-loop
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { lastValueFrom } from 'rxjs';
import { Engine } from '../src/engine/engine';
import { builtinFamilies } from '../src/families';

const ms = (ns: number) => +(ns / 1e6).toFixed(3);

async function main(): Promise<void> {
  const engine = await Engine.create({ families: builtinFamilies() });
  // Guidance on every step (`guidanceInterval: [0, 1]`) and deterministic Euler steps (`eta: 0`), the workload
  // docs/benchmarks.md's figures were measured on.
  const request = {
    task: 'T2V' as const,
    inputs: { prompt: 'a red ball in a dark blue room' },
    diffusion: { seed: 1, numInferenceSteps: 10, guidanceInterval: [0, 1] as [number, number], eta: 0 },
  };
  await lastValueFrom(engine.generate({ ...request, diffusion: { seed: 1, numInferenceSteps: 1 } }));

  const idle = monitorEventLoopDelay({ resolution: 1 });
  idle.enable();
  await new Promise((r) => setTimeout(r, 2000));
  idle.disable();

  const gen = monitorEventLoopDelay({ resolution: 1 });
  gen.enable();
  const t0 = performance.now();
  await lastValueFrom(engine.generate(request));
  const genMs = performance.now() - t0;
  gen.disable();

  console.log(
    JSON.stringify({
      gen_p50_ms: ms(gen.percentile(50)),
      gen_p99_ms: ms(gen.percentile(99)),
      gen_max_ms: ms(gen.max),
      idle_p99_ms: ms(idle.percentile(99)),
      p99_ratio: +(gen.percentile(99) / idle.percentile(99)).toFixed(2),
      steps: request.diffusion.numInferenceSteps,
      gen_ms: Math.round(genMs),
    }),
  );
  await engine.close();
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
