/**
 * Every native op against the float64 references in ./reference.ts, on small seeded random tensors.
 *
 * Tolerance. The kernels compute in float32; the references compute in float64 from the very same float32 inputs,
 * so the difference is the kernel's own rounding. Float32 unit roundoff is u = 2⁻²⁴ ≈ 6e-8. A dot product of
 * length K carries at most ≈ K·u·Σ|terms| and typically ≈ √K·u·|result| of error; the largest reductions here are
 * K = 324 (conv3d) and Lk = 300 (attention) with inputs scaled so results are O(1), i.e. typically ~1e-6 and far
 * below 1e-5. exp/tanh are polynomial approximations with ≈ 2e-7 relative error (simd.h); layer/rms norm derive a
 * float32 statistic per row. So every numeric op is checked with
 *
 *     max_i |native[i] − ref[i]| / (1 + |ref[i]|) ≤ TOL = 1e-5
 *
 * The worst value observed over this file is ≈ 1.6e-6 (linear, K = 300, with bias), so the bound has a ≈ 6×
 * margin over the rounding actually seen, while any indexing, tiling or blocking mistake gives O(1) errors.
 * Pure data movement (permute, upsample, embedding) must be exact.
 */
import { PlanBuilder, type ActivationName, type Value } from '../../src/native/plan-builder';
import { Rng } from '../../src/util/rng';
import { disposeAll, execute, expectClose, native, numel, randn, tensor } from './harness';
import * as ref from './reference';

const TOL = 1e-5;
const EXACT = 0;

afterEach(disposeAll);

// ---------------------------------------------------------------------------------------------------------------
describe('linear', () => {
  // Not multiples of the 12×32 micro-kernel tile; K > 256 crosses the K block (kKC = 256), M > 96 the M block.
  const Ms = [1, 5, 13, 97];
  const Ns = [1, 31, 33, 65];
  const Ks = [1, 7, 257, 300];
  const grid = (ms: number[], ns: number[], ks: number[]): Array<[number, number, number]> =>
    ms.flatMap((M) => ns.flatMap((N) => ks.map((K): [number, number, number] => [M, N, K])));
  const cases = grid(Ms, Ns, Ks);
  const acts: ActivationName[] = ['none', 'gelu_tanh', 'silu'];
  /** Seeded x [M, K] (N(0, 1)), w [N, K] (N(0, 1/K)), b [N] (N(0, 0.25)) and a plan with x as input, w and b as constants. */
  const operands = (seed: number, M: number, N: number, K: number) => {
    const rng = new Rng(seed);
    const x = randn(rng, M * K);
    const w = randn(rng, N * K, 1 / Math.sqrt(K));
    const b = randn(rng, N, 0.5);
    const g = new PlanBuilder();
    return { x, w, b, g, xv: g.input('x', [M, K]), wv: g.constant(tensor([N, K], w)), bv: g.constant(tensor([N], b)) };
  };

  test.each(cases)('M=%i N=%i K=%i: every activation, with and without bias', async (M, N, K) => {
    const { x, w, b, g, xv, wv, bv } = operands(1000 * M + 10 * N + K, M, N, K);
    for (const act of acts) {
      g.output(`${act}`, g.linear(xv, wv, undefined, { act }));
      g.output(`${act}+b`, g.linear(xv, wv, bv, { act }));
    }
    const out = await execute(g, { x });
    for (const act of acts) {
      expectClose(out[act], ref.linear(x, w, undefined, M, N, K, act), TOL, `linear ${act}`);
      expectClose(out[`${act}+b`], ref.linear(x, w, b, M, N, K, act), TOL, `linear ${act} with bias`);
    }
  });

  // bf16 path (matmulDtype 'bfloat16'): x and w are rounded to bf16, products are exact in float32 and summed in
  // float32, so against the float64 reference over the *rounded* operands the only error left is float32
  // accumulation, and TOL applies unchanged: that check is the one that catches a wrong pair order, a dropped odd k
  // or a blocking mistake. Odd K pads the last pair; K > 384 crosses the bf16 K block (192 pairs); M = 200 spans
  // two row blocks and several 12-row tiles with an edge. Against the unrounded reference the error is bf16's
  // (≤ 2⁻⁸ per operand), which the last check bounds.
  test.each(grid([1, 13, 200], [1, 33, 65], [1, 7, 300, 385]))('bfloat16 matmul, M=%i N=%i K=%i: bias and gelu_tanh epilogue', async (M, N, K) => {
    const { x, w, b, g, xv, wv, bv } = operands(7000 + 1000 * M + 10 * N + K, M, N, K);
    g.output('y', g.linear(xv, wv, bv, { act: 'gelu_tanh', matmulDtype: 'bfloat16' }));
    g.output('plain', g.linear(xv, wv, undefined, { matmulDtype: 'bfloat16' }));
    const out = await execute(g, { x });
    const [xr, wr] = [ref.roundToBf16(x), ref.roundToBf16(w)];
    expectClose(out.y, ref.linear(xr, wr, b, M, N, K, 'gelu_tanh'), TOL, 'bf16 linear vs rounded operands');
    expectClose(out.plain, ref.linear(xr, wr, undefined, M, N, K), TOL, 'bf16 linear, no epilogue');
    // |Σ x·w| error from rounding ≤ 2·2⁻⁸·Σ|x·w|, and Σ|x·w| ≈ (2/π)·√K here (x ~ N(0, 1), w ~ N(0, 1/K)), so
    // 2e-2·√K is a ≈ 4× margin over the worst case: a sanity bound on the size of bf16's error.
    expectClose(out.plain, ref.linear(x, w, undefined, M, N, K), 2e-2 * Math.sqrt(K), 'bf16 linear vs float32 operands');
  });

  // CPUs without AVX512_BF16 run the bf16 micro-kernel's float32 emulation; a build has one or both forms, so where the
  // instruction exists the addon compares them itself on operands spanning 40 binades. (This check found the two
  // rounding the "scale, then add C" of an accumulating K block differently: once fused, once not.) Without the
  // instruction only the emulation exists and every bfloat16 test above runs it.
  test("the bf16 kernel's float32 emulation equals the AVX512_BF16 instruction bit for bit", () => {
    const r = native.bf16Check();
    expect(r.native).toBe(native.stats().bf16Native);
    expect(r).toEqual(r.native ? { native: true, compared: 5 * 2 * 12 * 32, mismatches: 0 } : { native: false, compared: 0, mismatches: 0 });
  });

  test('a weight used by a float32 and a bfloat16 linear keeps both right (a packing slot per dtype)', async () => {
    const rng = new Rng(77);
    const [M, N, K] = [5, 40, 64];
    const x = randn(rng, M * K);
    const w = randn(rng, N * K, 1 / 8);
    const wt = tensor([N, K], w);
    const g = new PlanBuilder();
    const xv = g.input('x', [M, K]);
    g.output('f32', g.linear(xv, g.constant(wt), undefined));
    g.output('bf16', g.linear(xv, g.constant(wt), undefined, { matmulDtype: 'bfloat16' }));
    g.output('f32b', g.linear(xv, g.constant(wt), undefined));
    const out = await execute(g, { x });
    expectClose(out.f32, ref.linear(x, w, undefined, M, N, K), TOL, 'float32');
    expectClose(out.f32b, ref.linear(x, w, undefined, M, N, K), TOL, 'float32 after bf16');
    expectClose(out.bf16, ref.linear(ref.roundToBf16(x), ref.roundToBf16(w), undefined, M, N, K), TOL, 'bfloat16');
  });

  test('leading batch dims [2, 3, K] are flattened into M', async () => {
    const rng = new Rng(7);
    const [N, K] = [17, 40];
    const x = randn(rng, 6 * K);
    const w = randn(rng, N * K, 0.2);
    const g = new PlanBuilder();
    const y = g.linear(g.input('x', [2, 3, K]), g.constant(tensor([N, K], w)), undefined);
    expect(y.shape).toEqual([2, 3, N]);
    g.output('y', y);
    const out = await execute(g, { x });
    expectClose(out.y, ref.linear(x, w, undefined, 6, N, K), TOL);
  });

  test('a weight bound per run (packed on every run) and a weight viewed inside a larger const', async () => {
    const rng = new Rng(8);
    const [M, N, K] = [14, 35, 270];
    const x = randn(rng, M * K);
    const w = randn(rng, N * K, 1 / Math.sqrt(K));
    const b = randn(rng, N);
    const big = new Float32Array(5 + N * K);
    big.set(w, 5);
    const g = new PlanBuilder();
    const xv = g.input('x', [M, K]);
    const wSlot = g.input('w', [N, K]);
    const wView = g.slice(g.constant(tensor([big.length], big)), 5, [N, K]);
    g.output('perRun', g.linear(xv, wSlot, g.input('b', [N]), { act: 'silu' }));
    g.output('view', g.linear(xv, wView, undefined, { act: 'gelu_tanh' }));
    const out = await execute(g, { x, w, b });
    expectClose(out.perRun, ref.linear(x, w, b, M, N, K, 'silu'), TOL, 'per-run weight');
    expectClose(out.view, ref.linear(x, w, undefined, M, N, K, 'gelu_tanh'), TOL, 'const view weight');
  });

  // Every row count a tile at the bottom edge can have (M = 1…25: one to two full 12-row tiles plus 1…12 rows, split
  // over the threads in blocks of a multiple of 4 rows), on both panel widths (N ≤ 16: 16-column panels) and both A
  // paths (N > 128: A packed; else read in place), with and without a right-edge panel, across the K block.
  test.each([3, 16, 17, 64, 129, 160])('N=%i: every bottom-edge row count (M = 1…25) at K = 7 and 257', async (N) => {
    const rng = new Rng(20 + N);
    const Ms = Array.from({ length: 25 }, (_, i) => i + 1);
    const g = new PlanBuilder();
    const feeds: Record<string, Float32Array> = {};
    const want: Record<string, Float64Array> = {};
    for (const K of [7, 257]) {
      const w = randn(rng, N * K, 1 / Math.sqrt(K));
      const b = randn(rng, N, 0.5);
      const wv = g.constant(tensor([N, K], w));
      const bv = g.constant(tensor([N], b));
      for (const M of Ms) {
        const name = `M${M}K${K}`;
        feeds[`x${name}`] = randn(rng, M * K);
        g.output(name, g.linear(g.input(`x${name}`, [M, K]), wv, bv, { act: 'silu' }));
        want[name] = ref.linear(feeds[`x${name}`], w, b, M, N, K, 'silu');
      }
    }
    const out = await execute(g, feeds);
    for (const name of Object.keys(want)) expectClose(out[name], want[name], TOL, `linear ${name} N=${N}`);
  });

  // Batching must not change a result (batched CFG, interleaved requests): a row's value is the same bits whether it
  // is computed alone or in any position of a 64-row product (where it falls in a full tile, an edge tile, the
  // first or the second thread's block).
  test.each([3, 17, 160])('N=%i: a row computed alone equals, bit for bit, the same row inside a 64-row product', async (N) => {
    const rng = new Rng(40 + N);
    const [M, K] = [64, 300];
    const x = randn(rng, M * K);
    const g = new PlanBuilder();
    const wv = g.constant(tensor([N, K], randn(rng, N * K, 1 / Math.sqrt(K))));
    const bv = g.constant(tensor([N], randn(rng, N)));
    g.output('all', g.linear(g.input('x', [M, K]), wv, bv, { act: 'gelu_tanh' }));
    const feeds: Record<string, Float32Array> = { x };
    for (let i = 0; i < M; i++) {
      feeds[`x${i}`] = x.subarray(i * K, (i + 1) * K);
      g.output(`r${i}`, g.linear(g.input(`x${i}`, [1, K]), wv, bv, { act: 'gelu_tanh' }));
    }
    const out = await execute(g, feeds);
    for (let i = 0; i < M; i++) expect(Array.from(out[`r${i}`])).toEqual(Array.from(out.all.subarray(i * N, (i + 1) * N)));
  });

  test('one const tensor used as weights of two different shapes keeps both packings right', async () => {
    const rng = new Rng(9);
    const w = randn(rng, 6 * 10, 0.3);
    const x1 = randn(rng, 3 * 10);
    const x2 = randn(rng, 3 * 6);
    const g = new PlanBuilder();
    const wc = g.constant(tensor([6, 10], w));
    g.output('a', g.linear(g.input('x1', [3, 10]), wc, undefined));
    g.output('b', g.linear(g.input('x2', [3, 6]), g.reshape(wc, [10, 6]), undefined));
    const out = await execute(g, { x1, x2 });
    expectClose(out.a, ref.linear(x1, w, undefined, 3, 6, 10), TOL, '[6, 10] weight');
    expectClose(out.b, ref.linear(x2, w, undefined, 3, 10, 6), TOL, '[10, 6] weight');
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('attention', () => {
  interface Case {
    name: string;
    B: number;
    H: number;
    D: number;
    Lq: number;
    Lk: number;
    scale?: number;
    bias?: 'shared' | 'perBatch';
    /** Fraction of bias entries set to −inf (masked keys). */
    mask?: number;
    /** Rows (b, h, i) of the bias made entirely −inf. */
    deadRows?: Array<[number, number, number]>;
  }
  const cases: Case[] = [
    { name: 'B=1 H=1 D=8, Lq < Lk', B: 1, H: 1, D: 8, Lq: 5, Lk: 7 },
    { name: 'B=2 H=3 D=16, Lq > Lk, two q tiles, shared bias', B: 2, H: 3, D: 16, Lq: 33, Lk: 20, scale: 0.37, bias: 'shared' },
    { name: 'B=2 H=4 D=64, per-batch bias with −inf masked keys', B: 2, H: 4, D: 64, Lq: 7, Lk: 40, bias: 'perBatch', mask: 0.3 },
    { name: 'B=1 H=2 D=16, Lk = 300 (K-blocked P·V), shared bias with masks', B: 1, H: 2, D: 16, Lq: 3, Lk: 300, bias: 'shared', mask: 0.5 },
    { name: 'B=1 H=1 D=16, Lk = 401 (K-blocked P·V on the bf16 path too: 201 pairs), odd Lk', B: 1, H: 1, D: 16, Lq: 5, Lk: 401 },
    {
      name: 'B=2 H=2 D=8, fully −inf rows give zeros',
      B: 2,
      H: 2,
      D: 8,
      Lq: 4,
      Lk: 6,
      bias: 'perBatch',
      mask: 0.2,
      deadRows: [
        [0, 1, 2],
        [1, 0, 0],
        [1, 1, 3],
      ],
    },
    { name: 'B=2 H=1 D=8, shared bias with a fully −inf row', B: 2, H: 1, D: 8, Lq: 3, Lk: 5, bias: 'shared', deadRows: [[0, 0, 1]] },
    { name: 'B=1 per-batch bias (same as shared)', B: 1, H: 3, D: 16, Lq: 9, Lk: 11, bias: 'perBatch', mask: 0.1 },
  ];

  test.each(cases)('$name', async (c) => {
    const rng = new Rng(c.B * 1000 + c.H * 100 + c.D + c.Lq * 7 + c.Lk * 13);
    const HD = c.H * c.D;
    const scale = c.scale ?? 1 / Math.sqrt(c.D);
    const q = randn(rng, c.B * c.Lq * HD);
    const k = randn(rng, c.B * c.Lk * HD);
    const v = randn(rng, c.B * c.Lk * HD);
    const g = new PlanBuilder();
    const qv = g.input('q', [c.B, c.Lq, HD]);
    const kv = g.input('k', [c.B, c.Lk, HD]);
    const vv = g.input('v', [c.B, c.Lk, HD]);
    let bias: { data: Float32Array; perBatch: boolean } | undefined;
    let biasValue: Value | undefined;
    const feeds: Record<string, Float32Array> = { q, k, v };
    if (c.bias !== undefined) {
      const Bb = c.bias === 'perBatch' ? c.B : 1;
      const data = randn(rng, Bb * c.H * c.Lq * c.Lk);
      if (c.mask !== undefined) for (let i = 0; i < data.length; i++) if (rng.uniform() < c.mask) data[i] = -Infinity;
      for (const [b, h, i] of c.deadRows ?? []) data.fill(-Infinity, ((b * c.H + h) * c.Lq + i) * c.Lk, ((b * c.H + h) * c.Lq + i + 1) * c.Lk);
      bias = { data, perBatch: c.bias === 'perBatch' };
      biasValue = g.input('bias', [Bb, c.H, c.Lq, c.Lk]);
      feeds.bias = data;
    }
    g.output('y', g.attention(qv, kv, vv, { batch: c.B, heads: c.H, headDim: c.D, scale, bias: biasValue }));
    g.output('bf', g.attention(qv, kv, vv, { batch: c.B, heads: c.H, headDim: c.D, scale, bias: biasValue, matmulDtype: 'bfloat16' }));
    const out = await execute(g, feeds);
    const dims = { B: c.B, H: c.H, D: c.D, Lq: c.Lq, Lk: c.Lk, scale };
    expectClose(out.y, ref.attention(q, k, v, dims, bias), TOL, 'attention');
    // bf16 path: q, k, v rounded to bf16 (the reference takes the rounded values: q·k products are exact in float32),
    // then the probabilities P rounded too, which the reference does not do: |Σ_j ΔP_j·v_j| ≤ 2⁻⁸·Σ_j P_j·|v_j| ≤
    // 2⁻⁸·max|v|, on top of float32 rounding (TOL).
    const vr = ref.roundToBf16(v);
    const bound = 2 ** -8 * vr.reduce((m, x) => Math.max(m, Math.abs(x)), 0) + TOL;
    expectClose(out.bf, ref.attention(ref.roundToBf16(q), ref.roundToBf16(k), vr, dims, bias), bound, 'attention bf16');
    // …and it is the bf16 path, not float32 (which sits within TOL of the unrounded reference).
    expect(out.bf.some((x, i) => Math.abs(x - out.y[i]) > 10 * TOL)).toBe(true);
    for (const [b, h, i] of c.deadRows ?? []) {
      const o = (b * c.Lq + i) * HD + h * c.D;
      // A shared bias masks the row in every batch.
      const batches = c.bias === 'shared' ? Array.from({ length: c.B }, (_, j) => j) : [b];
      for (const bb of batches) {
        const ob = o + (bb - b) * c.Lq * HD;
        expect(Array.from(out.y.subarray(ob, ob + c.D))).toEqual(new Array(c.D).fill(0));
        expect(Array.from(out.bf.subarray(ob, ob + c.D))).toEqual(new Array(c.D).fill(0));
      }
    }
  });

  test('a bias shared over batches differs from a per-batch one (the kernel reads the right batch)', async () => {
    const rng = new Rng(77);
    const [B, H, D, Lq, Lk] = [2, 2, 8, 3, 4];
    const q = randn(rng, B * Lq * H * D);
    const k = randn(rng, B * Lk * H * D);
    const v = randn(rng, B * Lk * H * D);
    const bias = randn(rng, B * H * Lq * Lk, 3);
    const g = new PlanBuilder();
    const opts = { batch: B, heads: H, headDim: D, scale: 0.5 };
    const [qv, kv, vv] = [g.input('q', [B, Lq, H * D]), g.input('k', [B, Lk, H * D]), g.input('v', [B, Lk, H * D])];
    const bv = g.input('bias', [B, H, Lq, Lk]);
    g.output('per', g.attention(qv, kv, vv, { ...opts, bias: bv }));
    g.output('shared', g.attention(qv, kv, vv, { ...opts, bias: g.slice(bv, 0, [1, H, Lq, Lk]) }));
    const out = await execute(g, { q, k, v, bias });
    const dims = { B, H, D, Lq, Lk, scale: 0.5 };
    expectClose(out.per, ref.attention(q, k, v, dims, { data: bias, perBatch: true }), TOL, 'per-batch');
    expectClose(out.shared, ref.attention(q, k, v, dims, { data: bias.subarray(0, H * Lq * Lk), perBatch: false }), TOL, 'shared');
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('norms', () => {
  const shapes: Array<[number, number]> = [
    [1, 1],
    [3, 7],
    [5, 16],
    [4, 33],
    [2, 100],
    [300, 24], // several parallel items of rows
  ];

  test.each(shapes)('layer_norm M=%i N=%i with and without affine', async (M, N) => {
    const rng = new Rng(M * 131 + N);
    const x = randn(rng, M * N, 2);
    for (let i = 0; i < M * N; i++) x[i] += 0.5; // non-zero mean
    const w = randn(rng, N);
    const b = randn(rng, N);
    const g = new PlanBuilder();
    const xv = g.input('x', [M, N]);
    g.output('plain', g.layerNorm(xv, 1e-5));
    g.output('w', g.layerNorm(xv, 1e-6, g.constant(tensor([N], w))));
    g.output('wb', g.layerNorm(xv, 1e-5, g.constant(tensor([N], w)), g.constant(tensor([N], b))));
    const out = await execute(g, { x });
    expectClose(out.plain, ref.layerNorm(x, M, N, 1e-5), TOL, 'no affine');
    expectClose(out.w, ref.layerNorm(x, M, N, 1e-6, w), TOL, 'weight only');
    expectClose(out.wb, ref.layerNorm(x, M, N, 1e-5, w, b), TOL, 'weight and bias');
  });

  test.each(shapes)('rms_norm M=%i N=%i: plain and l2 forms', async (M, N) => {
    const rng = new Rng(M * 977 + N);
    const x = randn(rng, M * N, 1.5);
    if (M > 1) x.fill(0, N, 2 * N); // an all-zero row: eps keeps both forms finite
    const w = randn(rng, N);
    const b = randn(rng, N);
    const g = new PlanBuilder();
    const xv = g.input('x', [M, N]);
    const wv = g.constant(tensor([N], w));
    g.output('plain', g.rmsNorm(xv, 1e-6));
    g.output('plainW', g.rmsNorm(xv, 1e-6, wv));
    g.output('l2', g.rmsNorm(xv, 1e-12, undefined, { l2: true }));
    g.output('l2wb', g.rmsNorm(xv, 1e-12, wv, { l2: true, b: g.constant(tensor([N], b)) }));
    const out = await execute(g, { x });
    expectClose(out.plain, ref.rmsNorm(x, M, N, 1e-6, false), TOL, 'rms');
    expectClose(out.plainW, ref.rmsNorm(x, M, N, 1e-6, false, w), TOL, 'rms · w');
    expectClose(out.l2, ref.rmsNorm(x, M, N, 1e-12, true), TOL, 'l2');
    expectClose(out.l2wb, ref.rmsNorm(x, M, N, 1e-12, true, w, b), TOL, 'l2 · w + b');
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('elementwise', () => {
  // 1 and 15: scalar tail only; 16/17: one SIMD vector (+ tail); 40000: several 16384-float parallel chunks.
  test.each([1, 15, 16, 17, 1000, 40000])('gelu_tanh and silu, n=%i (incl. large magnitudes)', async (n) => {
    const rng = new Rng(n);
    const x = randn(rng, n, 3);
    const extremes = [-100, -30, -12, -9.5, -1e-4, 0, 1e-4, 9.5, 12, 30, 100];
    for (let i = 0; i < Math.min(n, extremes.length); i++) x[(i * 7) % n] = extremes[i];
    const g = new PlanBuilder();
    const xv = g.input('x', [n]);
    g.output('gelu', g.gelu(xv));
    g.output('silu', g.silu(xv));
    const out = await execute(g, { x });
    expectClose(out.gelu, ref.geluTanh(x), TOL, 'gelu_tanh');
    expectClose(out.silu, ref.silu(x), TOL, 'silu');
  });

  const pairs: Array<[string, number[], number[]]> = [
    ['same size [7, 9]', [7, 9], [7, 9]],
    ['same size, several chunks [40000]', [40000], [40000]],
    ['row broadcast [5, 33] + [33]', [5, 33], [33]],
    ['broadcast [4, 6, 8] + [6, 8]', [4, 6, 8], [6, 8]],
    ['scalar broadcast [3, 5] + [1]', [3, 5], [1]],
  ];
  test.each(pairs)('add, mul and scale: %s', async (_name, sa, sb) => {
    const rng = new Rng(numel(sa) + numel(sb));
    const a = randn(rng, numel(sa));
    const b = randn(rng, numel(sb));
    const g = new PlanBuilder();
    const av = g.input('a', sa);
    const bv = g.input('b', sb);
    g.output('add', g.add(av, bv));
    g.output('mul', g.mul(av, bv));
    g.output('scale', g.scale(av, -0.75));
    const out = await execute(g, { a, b });
    expectClose(out.add, ref.add(a, b), TOL, 'add');
    expectClose(out.mul, ref.mul(a, b), TOL, 'mul');
    expectClose(out.scale, ref.scale(a, -0.75), TOL, 'scale');
  });

  const mods: Array<[number, number, number, number, number]> = [
    // B, L, N, G, K
    [1, 5, 8, 1, 6],
    [2, 6, 13, 3, 6],
    [2, 12, 4, 4, 2],
    [3, 4, 40, 1, 3],
  ];
  test.each(mods)('modulate and gated_add B=%i L=%i N=%i G=%i K=%i', async (B, L, N, G, K) => {
    const rng = new Rng(B * 10000 + L * 100 + N + G * 7 + K);
    const x = randn(rng, B * L * N);
    const r = randn(rng, B * L * N);
    const e = randn(rng, B * G * K * N, 0.5);
    const shift = K - 1;
    const sc = 0;
    const gate = Math.floor(K / 2);
    const d = { B, L, N, G, K };
    const g = new PlanBuilder();
    const xv = g.input('x', [B, L, N]);
    const rv = g.input('r', [B, L, N]);
    const ev = g.input('e', [B, G, K, N]);
    g.output('mod', g.modulate(xv, ev, { batch: B, groups: G, chunks: K, shift, scale: sc }));
    g.output('gated', g.gatedAdd(xv, rv, { e: ev, batch: B, groups: G, chunks: K, index: gate }));
    g.output('plain', g.gatedAdd(xv, rv));
    const out = await execute(g, { x, r, e });
    expectClose(out.mod, ref.modulate(x, e, d, shift, sc), TOL, 'modulate');
    expectClose(out.gated, ref.gatedAdd(x, r, { e, dims: d, index: gate }), TOL, 'gated_add');
    expectClose(out.plain, ref.gatedAdd(x, r), TOL, 'ungated add');
  });
  test.each(mods)('modulate and gated_add with a [K, N] table and a broadcast e (eChunks 1) B=%i L=%i N=%i G=%i K=%i', async (B, L, N, G, K) => {
    const rng = new Rng(77 + B * 10000 + L * 100 + N + G * 7 + K);
    const x = randn(rng, B * L * N);
    const r = randn(rng, B * L * N);
    const table = randn(rng, K * N, 0.5);
    for (const Ke of [1, K]) {
      const e = randn(rng, B * G * Ke * N, 0.5);
      const shift = K - 1;
      const sc = 0;
      const gate = Math.floor(K / 2);
      const d = { B, L, N, G, K, Ke, table };
      const g = new PlanBuilder();
      const xv = g.input('x', [B, L, N]);
      const rv = g.input('r', [B, L, N]);
      const ev = g.input('e', [B, G, Ke, N]);
      const tv = g.input('table', [K, N]);
      const m = { batch: B, groups: G, chunks: K, eChunks: Ke, table: tv };
      g.output('mod', g.modulate(xv, ev, { ...m, shift, scale: sc }));
      g.output('gated', g.gatedAdd(xv, rv, { e: ev, ...m, index: gate }));
      const out = await execute(g, { x, r, e, table });
      expectClose(out.mod, ref.modulate(x, e, d, shift, sc), TOL, `modulate Ke=${Ke}`);
      expectClose(out.gated, ref.gatedAdd(x, r, { e, dims: d, index: gate }), TOL, `gated_add Ke=${Ke}`);
    }
  });

  test.each([
    [1, 3, 1, 2],
    [2, 5, 3, 8],
    [2, 4, 2, 64],
  ])('rope B=%i L=%i H=%i D=%i', async (B, L, H, D) => {
    const rng = new Rng(B * 1000 + L * 100 + H * 10 + D);
    const x = randn(rng, B * L * H * D);
    const cos = new Float32Array((L * D) / 2);
    const sin = new Float32Array((L * D) / 2);
    for (let l = 0; l < L; l++)
      for (let i = 0; i < D / 2; i++) {
        const theta = l * Math.pow(10000, (-2 * i) / D) + 0.1 * rng.normal();
        cos[(l * D) / 2 + i] = Math.cos(theta);
        sin[(l * D) / 2 + i] = Math.sin(theta);
      }
    const g = new PlanBuilder();
    g.output('y', g.rope(g.input('x', [B, L, H, D]), g.input('cos', [L, D / 2]), g.input('sin', [L, D / 2]), { batch: B, heads: H, headDim: D }));
    const out = await execute(g, { x, cos, sin });
    expectClose(out.y, ref.rope(x, cos, sin, B, L, H, D), TOL, 'rope');
  });

  test('embedding gathers rows exactly (first, last, repeated ids)', async () => {
    const rng = new Rng(5);
    const [V, N] = [11, 37];
    const table = randn(rng, V * N);
    const ids = Float32Array.from([0, 10, 3, 3, 7, 0, 1, 10, 5]);
    const g = new PlanBuilder();
    const y = g.embedding(g.input('ids', [ids.length]), g.constant(tensor([V, N], table)));
    expect(y.shape).toEqual([ids.length, N]);
    g.output('y', y);
    const out = await execute(g, { ids });
    expectClose(out.y, ref.embedding(ids, table, N), EXACT, 'embedding');
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('layout', () => {
  const perms: Array<[number[], number[]]> = [
    [
      [3, 5],
      [1, 0],
    ],
    [
      [1, 7],
      [1, 0],
    ],
    [
      [2, 3, 4],
      [2, 0, 1],
    ],
    [
      [2, 3, 4],
      [0, 2, 1],
    ],
    [
      [3, 1, 4, 5],
      [0, 2, 1, 3],
    ],
    [
      [2, 3, 2, 4],
      [3, 1, 0, 2],
    ],
    [
      [2, 3, 1, 2, 3],
      [4, 2, 0, 3, 1],
    ],
    [
      [2, 2, 3, 2, 2, 3],
      [5, 0, 4, 1, 3, 2],
    ],
    [
      [2, 1, 2, 3, 2, 2, 2],
      [6, 3, 0, 5, 1, 4, 2],
    ],
    [
      [2, 3, 4, 5],
      [0, 1, 2, 3],
    ], // identity
    [
      [3, 0, 2],
      [2, 1, 0],
    ], // empty
  ];
  test.each(perms)('permute dims=%j perm=%j', async (dims, perm) => {
    const rng = new Rng(dims.length * 97 + perm[0]);
    const n = numel(dims);
    const x = Float32Array.from({ length: n }, () => rng.normal());
    const g = new PlanBuilder();
    const y = g.permute(g.input('x', [n]), dims, perm);
    expect(y.shape).toEqual(perm.map((p) => dims[p]));
    g.output('y', y);
    const out = await execute(g, { x });
    expectClose(out.y, ref.permute(x, dims, perm), EXACT, 'permute');
  });

  test.each([
    [1, 1, 1, 1],
    [2, 3, 5, 4],
    [3, 4, 2, 17],
  ])('upsample_nearest2x F=%i H=%i W=%i C=%i', async (F, H, W, C) => {
    const rng = new Rng(F * 1000 + H * 100 + W * 10 + C);
    const x = randn(rng, F * H * W * C);
    const g = new PlanBuilder();
    g.output('y', g.upsample2x(g.input('x', [F, H, W, C]), { frames: F, height: H, width: W, channels: C }));
    const out = await execute(g, { x });
    expectClose(out.y, ref.upsampleNearest2x(x, F, H, W, C), EXACT, 'upsample');
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('conv3d (causal)', () => {
  interface Case {
    F: number;
    H: number;
    W: number;
    Ci: number;
    Co: number;
    kt: number;
    k: number;
    bias: boolean;
    history: boolean;
    constWeight: boolean;
  }
  const cases: Case[] = [
    { F: 2, H: 3, W: 4, Ci: 3, Co: 5, kt: 1, k: 1, bias: false, history: false, constWeight: true },
    { F: 2, H: 3, W: 4, Ci: 3, Co: 5, kt: 1, k: 3, bias: true, history: false, constWeight: true },
    { F: 3, H: 4, W: 3, Ci: 2, Co: 7, kt: 3, k: 1, bias: true, history: false, constWeight: true },
    { F: 3, H: 4, W: 3, Ci: 2, Co: 7, kt: 3, k: 1, bias: false, history: true, constWeight: true },
    { F: 1, H: 5, W: 5, Ci: 4, Co: 33, kt: 3, k: 3, bias: true, history: true, constWeight: true },
    { F: 2, H: 3, W: 3, Ci: 4, Co: 6, kt: 3, k: 3, bias: false, history: false, constWeight: false },
    // H·W = 100 > 96 rows (M blocking); Ci·kt·kh·kw = 12·27 = 324 > 256 (K blocking).
    { F: 2, H: 10, W: 10, Ci: 12, Co: 9, kt: 3, k: 3, bias: true, history: true, constWeight: true },
    // The VAE decoder's last convs: 16 and 3 output channels (one 16-column panel), and 17 (two of them).
    { F: 2, H: 9, W: 7, Ci: 8, Co: 16, kt: 3, k: 3, bias: true, history: true, constWeight: true },
    { F: 1, H: 9, W: 7, Ci: 16, Co: 3, kt: 3, k: 3, bias: true, history: true, constWeight: true },
    { F: 1, H: 6, W: 5, Ci: 5, Co: 17, kt: 3, k: 3, bias: false, history: false, constWeight: false },
  ];
  test.each(cases)('F=$F H=$H W=$W Ci=$Ci Co=$Co kt=$kt k=$k bias=$bias history=$history const=$constWeight', async (c) => {
    const rng = new Rng(c.F * 10007 + c.H * 1009 + c.W * 101 + c.Ci * 11 + c.Co + c.kt * 3 + c.k);
    const kfeat = c.Ci * c.kt * c.k * c.k;
    const x = randn(rng, c.F * c.H * c.W * c.Ci);
    const w = randn(rng, c.Co * kfeat, 1 / Math.sqrt(kfeat));
    const b = c.bias ? randn(rng, c.Co) : undefined;
    const hist = c.history ? randn(rng, (c.kt - 1) * c.H * c.W * c.Ci) : undefined;
    const g = new PlanBuilder();
    const wShape = [c.Co, c.Ci, c.kt, c.k, c.k];
    const feeds: Record<string, Float32Array> = { x };
    let wv: Value;
    if (c.constWeight) {
      wv = g.constant(tensor(wShape, w));
    } else {
      wv = g.input('w', wShape);
      feeds.w = w;
    }
    let hv: Value | undefined;
    if (hist !== undefined) {
      hv = g.input('history', [c.kt - 1, c.H, c.W, c.Ci]);
      feeds.history = hist;
    }
    const bv = b === undefined ? undefined : g.constant(tensor([c.Co], b));
    const y = g.conv3d(g.input('x', [c.F, c.H, c.W, c.Ci]), wv, bv, { frames: c.F, height: c.H, width: c.W }, { history: hv });
    expect(y.shape).toEqual([c.F, c.H, c.W, c.Co]);
    g.output('y', y);
    const out = await execute(g, feeds);
    const want = ref.conv3dCausal(x, w, b, hist, { F: c.F, H: c.H, W: c.W, Ci: c.Ci, Co: c.Co, kt: c.kt, kh: c.k, kw: c.k });
    expectClose(out.y, want, TOL, 'conv3d');
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('multi-op plan with arena reuse', () => {
  const [M, K, N] = [8, 16, 64];
  const rng = new Rng(4242);
  const w1 = randn(rng, N * K, 1 / Math.sqrt(K));
  const b1 = randn(rng, N, 0.1);
  const w2 = randn(rng, K * N, 1 / Math.sqrt(N));
  const lnw = randn(rng, K);
  const lnb = randn(rng, K);

  function reference(x: Float32Array): Float64Array {
    // Intermediates are rounded to float32 exactly where the kernels store them, so op-by-op differences do not
    // compound against a pure-float64 chain.
    const f32 = (a: Float64Array) => Float32Array.from(a);
    const h1 = f32(ref.linear(x, w1, b1, M, N, K, 'none'));
    const h2 = f32(ref.geluTanh(h1));
    const h3 = f32(ref.linear(h2, w2, undefined, M, K, N));
    const h4 = f32(ref.add(h3, x));
    const h5 = f32(ref.layerNorm(h4, M, K, 1e-5, lnw, lnb));
    const h6 = f32(ref.scale(h5, 0.5));
    const h7 = f32(ref.silu(h6));
    return ref.mul(h7, h5);
  }

  test('results are right, the arena is smaller than the sum of intermediates, and segments compose', async () => {
    const g = new PlanBuilder();
    const x = g.input('x', [M, K]);
    g.segment('a');
    const h1 = g.linear(x, g.constant(tensor([N, K], w1)), g.constant(tensor([N], b1)));
    const h2 = g.gelu(h1);
    const h3 = g.linear(h2, g.constant(tensor([K, N], w2)), undefined);
    const h4 = g.add(h3, x);
    g.segment('b');
    const h5 = g.layerNorm(h4, 1e-5, g.constant(tensor([K], lnw)), g.constant(tensor([K], lnb)));
    const h6 = g.scale(h5, 0.5);
    const h7 = g.silu(h6);
    g.output('y', g.mul(h7, h5)); // h5 stays live across h6 and h7
    const intermediates = [h1, h2, h3, h4, h5, h6, h7];
    const sumBytes = intermediates.reduce((s, v) => s + 4 * numel(v.shape), 0);

    const plan = g.compile(native);
    try {
      expect(plan.numOps).toBe(8);
      expect(plan.arenaBytes).toBeGreaterThan(0);
      expect(plan.arenaBytes).toBeLessThan(sumBytes);
      // Two live [M, N] buffers (h1 → h2) bound the arena from below.
      expect(plan.arenaBytes).toBeGreaterThanOrEqual(2 * 4 * M * N);

      const xs = [randn(rng, M * K), randn(rng, M * K, 3)];
      const y = tensor([M, K]);
      for (const xd of xs) {
        // Twice with different inputs: nothing stale survives in the shared arena.
        const xt = tensor([M, K], xd);
        await plan.run({ x: xt, y });
        expectClose(y.data, reference(xd), TOL, 'whole plan');
        y.data.fill(0);
        await plan.run({ x: xt, y }, 'a');
        await plan.run({ x: xt, y }, 'b');
        expectClose(y.data, reference(xd), TOL, 'segments a then b');
      }
    } finally {
      plan.dispose();
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('NaN propagation (the NaN watch relies on it)', () => {
  test('attention: a NaN in a query row or a bias entry makes exactly that output row NaN', async () => {
    const rng = new Rng(31);
    const [B, H, D, Lq, Lk] = [2, 2, 16, 5, 40];
    const HD = H * D;
    const q = randn(rng, B * Lq * HD);
    const k = randn(rng, B * Lk * HD);
    const v = randn(rng, B * Lk * HD);
    const bias = randn(rng, B * H * Lq * Lk);
    q[(0 * Lq + 1) * HD + 1 * D + 3] = NaN; // b=0, i=1, h=1
    bias[((1 * H + 0) * Lq + 4) * Lk + 39] = NaN; // b=1, h=0, i=4 (scalar softmax tail)
    bias[((1 * H + 1) * Lq + 2) * Lk + 5] = NaN; // b=1, h=1, i=2 (SIMD part)
    const g = new PlanBuilder();
    const y = g.attention(g.input('q', [B, Lq, HD]), g.input('k', [B, Lk, HD]), g.input('v', [B, Lk, HD]), {
      batch: B,
      heads: H,
      headDim: D,
      scale: 0.25,
      bias: g.input('bias', [B, H, Lq, Lk]),
    });
    g.output('y', y);
    const out = await execute(g, { q, k, v, bias });
    const want = ref.attention(q, k, v, { B, H, D, Lq, Lk, scale: 0.25 }, { data: bias, perBatch: true });
    let nanRows = 0;
    for (let r = 0; r < B * Lq * H; r++) if (Number.isNaN(want[r * D])) nanRows++;
    expect(nanRows).toBe(3);
    expectClose(out.y, want, TOL, 'attention with NaN'); // NaN exactly where the reference has NaN
  });

  test('gelu_tanh and silu keep NaN in SIMD lanes and the scalar tail', async () => {
    const x = Float32Array.from({ length: 35 }, (_, i) => i / 7 - 2);
    x[3] = NaN;
    x[33] = NaN;
    const g = new PlanBuilder();
    const xv = g.input('x', [35]);
    g.output('gelu', g.gelu(xv));
    g.output('silu', g.silu(xv));
    g.output('lin', g.linear(g.reshape(xv, [5, 7]), g.constant(tensor([3, 7], new Float32Array(21).fill(0.1))), undefined, { act: 'gelu_tanh' }));
    const out = await execute(g, { x });
    for (const name of ['gelu', 'silu']) {
      const y = out[name];
      expect(Number.isNaN(y[3]) && Number.isNaN(y[33])).toBe(true);
      expect(y.filter((t) => Number.isNaN(t)).length).toBe(2);
    }
    expectClose(out.gelu, ref.geluTanh(x), TOL, 'gelu');
    expectClose(out.silu, ref.silu(x), TOL, 'silu');
    // Rows 0 and 4 of the [5, 7] view hold the NaNs: their linear outputs are NaN, the others finite.
    expect(Array.from(out.lin, (t) => Number.isNaN(t))).toEqual([
      true,
      true,
      true,
      false,
      false,
      false,
      false,
      false,
      false,
      false,
      false,
      false,
      true,
      true,
      true,
    ]);
  });

  test('layer_norm and rms_norm: a NaN makes its row NaN and leaves other rows finite', async () => {
    const rng = new Rng(32);
    const [M, N] = [4, 40];
    const x = randn(rng, M * N);
    x[1 * N + 17] = NaN;
    x[3 * N + 39] = NaN;
    const g = new PlanBuilder();
    const xv = g.input('x', [M, N]);
    g.output('ln', g.layerNorm(xv, 1e-5));
    g.output('rms', g.rmsNorm(xv, 1e-6));
    const out = await execute(g, { x });
    for (const name of ['ln', 'rms']) {
      for (let i = 0; i < M; i++) {
        const row = Array.from(out[name].subarray(i * N, (i + 1) * N));
        if (i === 1 || i === 3) expect(row.every(Number.isNaN)).toBe(true);
        else expect(row.every(Number.isFinite)).toBe(true);
      }
    }
    expectClose(out.ln, ref.layerNorm(x, M, N, 1e-5), TOL, 'layer_norm');
  });
});
