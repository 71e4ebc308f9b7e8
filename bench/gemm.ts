/**
 * GEMM throughput of the native linear op against a plain TypeScript triple loop (the baseline), same shapes,
 * same process. Prints one JSON line per shape: {"shape", "omnirx_ms", "baseline_ms", "omnirx_gflops",
 * "baseline_gflops", "speedup"} (medians). Run: npm run bench:gemm
 */
import { createTensor, loadNative } from '../src/native/binding';
import { PlanBuilder } from '../src/native/plan-builder';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function plainLinear(x: Float32Array, w: Float32Array, y: Float32Array, M: number, N: number, K: number): void {
  for (let i = 0; i < M; i++)
    for (let j = 0; j < N; j++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += x[i * K + k] * w[j * K + k];
      y[i * N + j] = s;
    }
}

async function main(): Promise<void> {
  const native = loadNative();
  for (const [M, N, K] of [
    [256, 256, 256],
    [1024, 256, 256],
    [1024, 1024, 256],
    [1024, 1024, 1024],
  ]) {
    const xs = Float32Array.from({ length: M * K }, (_, i) => Math.sin(i));
    const ws = Float32Array.from({ length: N * K }, (_, i) => Math.cos(i));
    const g = new PlanBuilder();
    const w = createTensor(native, [N, K], ws);
    g.output('y', g.linear(g.input('x', [M, K]), g.constant(w), undefined));
    const plan = g.compile(native);
    const x = createTensor(native, [M, K], xs);
    const y = createTensor(native, [M, N]);
    const yb = new Float32Array(M * N);
    const ours: number[] = [];
    const base: number[] = [];
    await plan.run({ x, y });
    const reps = 5;
    for (let r = 0; r < reps; r++) {
      let t = performance.now();
      await plan.run({ x, y });
      ours.push(performance.now() - t);
      t = performance.now();
      plainLinear(xs, ws, yb, M, N, K);
      base.push(performance.now() - t);
    }
    const flops = 2 * M * N * K;
    const o = median(ours);
    const b = median(base);
    console.log(
      JSON.stringify({
        shape: `${M}x${N}x${K}`,
        omnirx_ms: +o.toFixed(3),
        baseline_ms: +b.toFixed(1),
        omnirx_gflops: +(flops / o / 1e6).toFixed(1),
        baseline_gflops: +(flops / b / 1e6).toFixed(2),
        speedup: +(b / o).toFixed(1),
      }),
    );
    plan.dispose();
    for (const t of [w, x, y]) t.dispose();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
