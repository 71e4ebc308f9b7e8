/**
 * Hostile input from JS must never crash the process and must fail with a clear error: malformed tensors, malformed
 * or inconsistent plan specs (both through PlanBuilder and hand-written straight to `new native.Plan`), bad
 * bindings, bad token ids at run time, and tensors disposed while a run uses them. Every test also checks that it
 * leaks no native memory (see afterEach).
 *
 * Specs that would kill the process if the addon mis-handled them (an integer-overflow division by zero inside the
 * compile step) are compiled in a child process, so a crash is reported as a failed test instead of taking the test
 * worker down. Specs that would only misbehave when *run* are compiled here and never run.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as path from 'node:path';

import { OmniError } from '../../src/errors';
import { createTensor, type NativePlan, type NativeTensor, type PlanOpSpec, type PlanSpec, type PlanValueSpec } from '../../src/native/binding';
import { PlanBuilder, type CompiledPlan } from '../../src/native/plan-builder';
import { Rng } from '../../src/util/rng';
import { settledBytesInUse } from '../helpers/native-memory';
import { disposeAll, native, randn, tensor } from './harness';
import * as ref from './reference';

// ---- helpers -----------------------------------------------------------------------------------------------------

/** The error a call throws synchronously or rejects with; fails the test when it succeeds. */
async function failure(call: () => unknown): Promise<Error> {
  try {
    await call();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected the call to fail, but it succeeded');
}

function syncFailure(call: () => unknown): Error {
  try {
    call();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected the call to throw, but it returned');
}

/** An OmniError with code OMNIRX_ERR_NATIVE whose message matches `re`. */
function expectNativeOmniError(e: unknown, re: RegExp): void {
  expect(e).toBeInstanceOf(OmniError);
  expect((e as OmniError).code).toBe('OMNIRX_ERR_NATIVE');
  expect((e as OmniError).message).toMatch(re);
}

/**
 * The error `new native.Plan(spec)` throws. Errors from the addon come from Node's own realm (not jest's), so they
 * are checked by shape (a string message), not with instanceof. A spec the addon wrongly accepts is disposed at
 * once — never run — and fails the test.
 */
function specError(spec: unknown): Error {
  let plan: NativePlan;
  try {
    plan = new native.Plan(spec as PlanSpec);
  } catch (e) {
    expect(typeof (e as Error).message).toBe('string');
    return e as Error;
  }
  plan.dispose();
  throw new Error('the addon accepted the spec');
}

function slotValues(shapes: number[][]): PlanValueSpec[] {
  return shapes.map((shape, index) => ({ kind: 2, index, offset: 0, shape }));
}

/** A spec whose values are exactly its slots, in order (value i = slot i). */
function slotSpec(shapes: number[][], ops: PlanOpSpec[], over: Partial<PlanSpec> = {}): PlanSpec {
  return { arenaFloats: 0, consts: [], slots: shapes, values: slotValues(shapes), ops, ...over };
}

const ADDON = ['Release', 'Debug'].map((d) => path.resolve(__dirname, '..', '..', 'native', 'build', d, 'omnirx_native.node')).find((p) => existsSync(p));

const CHILD = `
const n = require(process.argv[1]);
let out;
try { new n.Plan(JSON.parse(process.argv[2])).dispose(); out = { accepted: true }; }
catch (e) { out = { error: String(e && e.message) }; }
process.stdout.write(JSON.stringify(out));
`;

/** Compiles a slot-only spec in a child process; throws if the child dies (signal or non-zero exit). */
function compileIsolated(spec: PlanSpec): { accepted?: true; error?: string } {
  if (ADDON === undefined) throw new Error('native addon not built');
  const r = spawnSync(process.execPath, ['-e', CHILD, ADDON, JSON.stringify(spec)], { encoding: 'utf8', timeout: 20000 });
  if (r.error !== undefined) throw r.error;
  if (r.signal !== null || r.status !== 0) {
    throw new Error(`compiling the spec killed the process (signal ${r.signal}, exit status ${r.status}): ${r.stderr.slice(0, 400)}`);
  }
  return JSON.parse(r.stdout) as { accepted?: true; error?: string };
}

// ---- leak check around every test ----------------------------------------------------------------------------

let before = 0;

// Per-thread scratch persists: a GEMM allocates a fixed-size packing buffer on each thread the first time that
// thread runs one. To keep the leak check exact whatever the thread count and scheduling, every GEMM in this file is
// a single work item (M ≤ 96 rows, N ≤ 32 columns), which the pool runs inline on the executor thread; the warm-up
// below gives that thread its buffer, and helper threads here only ever run scratch-free kernels.
beforeAll(async () => {
  const rng = new Rng(1);
  const g = new PlanBuilder();
  g.output('y', g.linear(g.input('x', [96, 64]), g.constant(tensor([32, 64], randn(rng, 32 * 64))), undefined));
  const plan = g.compile(native);
  await plan.run({ x: tensor([96, 64], randn(rng, 96 * 64)), y: tensor([96, 32]) });
  plan.dispose();
  disposeAll();
  // What earlier test files left in flight or to the garbage collector is freed now, not during a test here.
  await settledBytesInUse(native);
});

beforeEach(() => {
  before = native.stats().bytesInUse;
});

afterEach(() => {
  disposeAll();
  expect(native.stats().bytesInUse).toBe(before);
});

// ---------------------------------------------------------------------------------------------------------------
describe('Tensor construction', () => {
  test.each<[string, unknown[], RegExp]>([
    ['a negative dim', [2, -1], /Tensor: dim 1 must be a non-negative integer/],
    ['a NaN dim', [NaN], /Tensor: dim 0 must be a non-negative integer/],
    ['a fractional dim', [3, 2.5], /Tensor: dim 1 must be a non-negative integer/],
    ['an infinite dim', [Infinity], /Tensor: dim 0 must be a non-negative integer/],
    ['a huge dim (2^40)', [2 ** 40], /Tensor: dim 0 must be a non-negative integer/],
    ['a dim of 1e300', [1e300], /Tensor: dim 0 must be a non-negative integer/],
    ['more than 2^32 elements in all', [65536, 65536, 2], /Tensor: shape has more than 2\^32 elements/],
    ['a string dim', ['3'], /Tensor: dim 0 is not a number/],
    ['an object dim with valueOf', [{ valueOf: () => 3 }], /Tensor: dim 0 is not a number/],
    ['a hole', new Array<number>(2), /Tensor: dim 0 is not a number/],
    ['rank 9', [1, 1, 1, 1, 1, 1, 1, 1, 1], /Tensor: rank 9 exceeds 8/],
  ])('%s is rejected', (_name, shape, re) => {
    expect(() => new native.Tensor(shape as number[])).toThrow(re);
  });

  test.each<[string, unknown]>([
    ['a number', 5],
    ['a string', '2,3'],
    ['undefined', undefined],
    ['null', null],
    ['an array-like object', { 0: 2, length: 1 }],
    ['a typed array', new Float32Array([2, 3])],
  ])('a shape that is %s is rejected', (_name, shape) => {
    expect(() => new native.Tensor(shape as number[])).toThrow(/Tensor: shape must be an array of integers/);
  });

  test('rank 8, empty and scalar shapes are fine', () => {
    const t8 = tensor([1, 2, 1, 2, 1, 2, 1, 2]);
    expect(t8.numel).toBe(16);
    expect(tensor([3, 0]).numel).toBe(0);
    expect(tensor([]).numel).toBe(1);
  });

  test('createTensor with the wrong data length is an OmniError and frees the tensor it allocated', () => {
    const buffers = native.stats().buffers;
    expectNativeOmniError(
      syncFailure(() => createTensor(native, [2, 3], [1, 2, 3, 4, 5])),
      /createTensor: 5 values given for shape \[2, 3\] \(6 elements\)/,
    );
    expectNativeOmniError(
      syncFailure(() => createTensor(native, [2], new Float32Array(3))),
      /3 values given/,
    );
    expect(native.stats().buffers).toBe(buffers);
  });

  test('Tensor methods called on a forged or foreign object throw instead of crashing', () => {
    const forged = Object.create(native.Tensor.prototype) as NativeTensor;
    expect(() => forged.data).toThrow();
    expect(() => forged.shape).toThrow();
    expect(() => forged.dispose()).toThrow();
    const dataGetter = Object.getOwnPropertyDescriptor(native.Tensor.prototype, 'data')?.get;
    expect(() => dataGetter?.call({})).toThrow();
    expect(() => (native.Tensor as unknown as (s: number[]) => unknown)([2])).toThrow(/without 'new'/);
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('Tensor lifecycle', () => {
  test('data after dispose throws; dispose twice is fine; an old view is detached, not dangling', () => {
    const t = createTensor(native, [4], [1, 2, 3, 4]);
    const view = t.data;
    expect(Array.from(view)).toEqual([1, 2, 3, 4]);
    t.dispose();
    expect(t.disposed).toBe(true);
    expect(() => t.data).toThrow(/Tensor.data: tensor was disposed/);
    expect(() => t.dispose()).not.toThrow();
    expect(view.length).toBe(0); // the ArrayBuffer was detached: no access to freed memory
    expect(view[0]).toBeUndefined();
    expect(t.shape).toEqual([4]);
  });

  test('disposing tensors and the plan while runs that use them are in flight: no crash, runs complete', async () => {
    const rng = new Rng(2);
    const [M, K, N] = [96, 1024, 32]; // one GEMM work item (see the leak check above), the rest elementwise
    const w = randn(rng, N * K, 1 / Math.sqrt(K));
    const wt = createTensor(native, [N, K], w);
    const g = new PlanBuilder();
    const h = g.gelu(g.input('x', [M, K]));
    g.output('y', g.layerNorm(g.linear(h, g.constant(wt), undefined, { act: 'silu' }), 1e-5));
    const plan = g.compile(native);
    const xs = [0, 1, 2, 3, 4].map(() => randn(rng, M * K));
    const xts = xs.map((d) => createTensor(native, [M, K], d));
    const yts = xs.map(() => createTensor(native, [M, N]));
    const runs = xs.map((_, i) => plan.run({ x: xts[i], y: yts[i] }));
    let settled = false;
    void Promise.allSettled(runs).then(() => (settled = true));
    // All five runs are queued on the executor (or running); none has settled on this thread yet.
    xts[3].dispose(); // an input of a queued run
    yts[4].dispose(); // the output of a queued run
    wt.dispose(); // the constant weight
    plan.dispose(); // and the plan itself
    expect(settled).toBe(false);
    await Promise.all(runs);
    expect(yts[3].data.length).toBe(M * N);
    const want = ref.layerNorm(ref.linear(Float32Array.from(ref.geluTanh(xs[3])), w, undefined, M, N, K, 'silu'), M, N, 1e-5);
    const got = yts[3].data;
    let worst = 0;
    for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]) / (1 + Math.abs(want[i])));
    expect(worst).toBeLessThan(1e-5);
    expect(plan.numOps).toBe(0);
    expectNativeOmniError(await failure(() => plan.run({ x: xts[0], y: yts[0] })), /plan run: Plan\.run: plan was disposed/);
    for (const t of [...xts, ...yts]) t.dispose();
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('hand-written PlanSpec: structure', () => {
  const copy = (i: number, o: number): PlanOpSpec => ({ op: 'copy', inputs: [i], outputs: [o] });

  test.each<[string, unknown, RegExp]>([
    ['a number', 42, /Plan: spec must be an object/],
    ['null', null, /Plan: spec must be an object/],
    ['an empty object', {}, /Plan: 'consts' must be an array/],
    ['slots not an array', { consts: [], slots: 3 }, /Plan: 'slots' must be an array/],
    ['a bad slot shape', { consts: [], slots: [[2, -3]] }, /Plan: slots\[0\]: dim 1 must be a non-negative integer/],
    ['a negative arenaFloats', { consts: [], slots: [], arenaFloats: -1 }, /Plan: 'arenaFloats' must be a non-negative integer/],
    ['a NaN arenaFloats', { consts: [], slots: [], arenaFloats: NaN }, /Plan: 'arenaFloats' must be a non-negative integer/],
    ['a fractional arenaFloats', { consts: [], slots: [], arenaFloats: 1.5 }, /Plan: 'arenaFloats' must be a non-negative integer/],
    ['a string arenaFloats', { consts: [], slots: [], arenaFloats: '16' }, /Plan: 'arenaFloats' must be a number/],
    ['an arena over 32 GiB', { consts: [], slots: [], arenaFloats: 2 ** 34 }, /Plan: arena larger than 32 GiB/],
    ['values not an array', { consts: [], slots: [], arenaFloats: 0, values: {} }, /Plan: 'values' must be an array/],
    ['a value that is not an object', { consts: [], slots: [], arenaFloats: 0, values: [7] }, /Plan: values\[0\] must be an object/],
    [
      'a value of kind 3',
      { consts: [], slots: [], arenaFloats: 4, values: [{ kind: 3, index: 0, offset: 0, shape: [1] }] },
      /values\[0\]: kind must be 0 \(arena\), 1 \(const\) or 2 \(slot\)/,
    ],
    [
      'a negative value index',
      { consts: [], slots: [[4]], arenaFloats: 0, values: [{ kind: 2, index: -1, offset: 0, shape: [4] }] },
      /values\[0\]: 'index' must be a non-negative integer/,
    ],
    [
      'a const index out of range',
      { consts: [], slots: [], arenaFloats: 0, values: [{ kind: 1, index: 0, offset: 0, shape: [1] }] },
      /values\[0\]: const index out of range/,
    ],
    [
      'a slot index out of range',
      { consts: [], slots: [[4]], arenaFloats: 0, values: [{ kind: 2, index: 1, offset: 0, shape: [4] }] },
      /values\[0\]: slot index out of range/,
    ],
    [
      'a bad value shape',
      { consts: [], slots: [[4]], arenaFloats: 0, values: [{ kind: 2, index: 0, offset: 0, shape: [-4] }] },
      /values\[0\]: dim 0 must be a non-negative integer/,
    ],
    [
      'a slot value offset beyond its storage',
      {
        consts: [],
        slots: [[4]],
        arenaFloats: 0,
        values: [
          { kind: 2, index: 0, offset: 0, shape: [4] },
          { kind: 2, index: 0, offset: 3, shape: [4] },
        ],
      },
      /values\[1\]: offset 3 \+ 4 elements exceed its storage of 4/,
    ],
    [
      'an arena value beyond arenaFloats',
      { consts: [], slots: [], arenaFloats: 8, values: [{ kind: 0, index: 0, offset: 4, shape: [5] }] },
      /values\[0\]: offset 4 \+ 5 elements exceed its storage of 8/,
    ],
    ['ops not an array', { ...slotSpec([[2]], []), ops: 'copy' }, /Plan: 'ops' must be an array/],
    ['an op that is not an object', { ...slotSpec([[2]], []), ops: [null] }, /Plan: op #0 must be an object/],
    [
      'an op name that is not a string',
      slotSpec([[2], [2]], [{ op: 7 as unknown as string, inputs: [0], outputs: [1] }]),
      /Plan: op #0: 'op' must be a string/,
    ],
    ['an unknown op', slotSpec([[2], [2]], [{ op: 'frobnicate', inputs: [0], outputs: [1] }]), /Plan: op #0: unknown op 'frobnicate'/],
    ['the op index of a later bad op', slotSpec([[2], [2]], [copy(0, 1), { op: 'softmax', inputs: [0], outputs: [1] }]), /Plan: op #1: unknown op 'softmax'/],
    [
      'too few inputs',
      slotSpec(
        [
          [2, 4],
          [3, 4],
          [2, 3],
        ],
        [{ op: 'linear', inputs: [0], outputs: [2] }],
      ),
      /Plan: op #0 linear: takes 2\.\.3 inputs, got 1/,
    ],
    ['too many inputs', slotSpec([[2], [2]], [{ op: 'add', inputs: [0, 0, 0], outputs: [1] }]), /Plan: op #0 add: takes 2\.\.2 inputs, got 3/],
    ['two outputs', slotSpec([[2], [2]], [{ op: 'copy', inputs: [0], outputs: [1, 1] }]), /Plan: op #0 copy: takes 1 outputs, got 2/],
    [
      'inputs not an array',
      slotSpec([[2], [2]], [{ op: 'copy', inputs: 0 as unknown as number[], outputs: [1] }]),
      /Plan: op #0 copy: 'inputs' must be an array/,
    ],
    [
      'an operand index out of range',
      slotSpec(
        [
          [2, 4],
          [3, 4],
          [2, 3],
        ],
        [{ op: 'linear', inputs: [0, 99], outputs: [2] }],
      ),
      /Plan: op #0 linear: operand index 99(\.0+)? out of range/,
    ],
    ['a fractional operand index', slotSpec([[2], [2]], [{ op: 'copy', inputs: [0.5], outputs: [1] }]), /Plan: op #0 copy: operand index 0\.50* out of range/],
    ['−1 for a required operand', slotSpec([[2], [2]], [{ op: 'copy', inputs: [-1], outputs: [1] }]), /Plan: op #0 copy: operand index -1(\.0+)? out of range/],
    ['−1 for the output', slotSpec([[2], [2]], [{ op: 'copy', inputs: [0], outputs: [-1] }]), /Plan: op #0 copy: operand index -1(\.0+)? out of range/],
    [
      'a string operand index',
      slotSpec([[2], [2]], [{ op: 'copy', inputs: ['0' as unknown as number], outputs: [1] }]),
      /Plan: op #0 copy: operand indices must be numbers/,
    ],
    [
      'a label in the message',
      slotSpec([[2], [3]], [{ op: 'copy', label: 'blk3.out', inputs: [0], outputs: [1] }]),
      /Plan: op #0 copy 'blk3\.out': output has shape \[3\]/,
    ],
    [
      'a const that is a plain object',
      { ...slotSpec([], []), consts: [{ data: new Float32Array(2), shape: [2], numel: 2 }] },
      /Plan: consts\[0\] is not a Tensor/,
    ],
    ['a const that is a number', { ...slotSpec([], []), consts: [42] }, /Plan: consts\[0\] is not a Tensor/],
    ['a const that is null', { ...slotSpec([], []), consts: [null] }, /Plan: consts\[0\] is not a Tensor/],
  ])('%s', (_name, spec, re) => {
    expect(specError(spec).message).toMatch(re);
  });

  test('a disposed const, a const written to, and a forged Tensor const are rejected', () => {
    const t = createTensor(native, [2], [1, 2]);
    t.dispose();
    expect(specError({ ...slotSpec([], []), consts: [t] }).message).toMatch(/Plan: consts\[0\] was disposed/);
    const c = tensor([2]);
    const spec: PlanSpec = {
      arenaFloats: 0,
      consts: [c],
      slots: [[2]],
      values: [
        { kind: 2, index: 0, offset: 0, shape: [2] },
        { kind: 1, index: 0, offset: 0, shape: [2] },
      ],
      ops: [{ op: 'copy', inputs: [0], outputs: [1] }],
    };
    expect(specError(spec).message).toMatch(/Plan: op #0 copy: cannot write to a constant/);
    expect(() => specError({ ...slotSpec([], []), consts: [Object.create(native.Tensor.prototype)] })).not.toThrow();
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('hand-written PlanSpec: operand shapes per op', () => {
  const att = (extra: Record<string, number> = {}) => ({ batch: 1, heads: 2, headDim: 4, scale: 0.5, ...extra });
  const mod = (extra: Record<string, number> = {}) => ({ batch: 1, groups: 1, chunks: 6, shift: 0, scale: 1, ...extra });
  test.each<[string, number[][], PlanOpSpec, RegExp]>([
    [
      'linear: K mismatch',
      [
        [3, 5],
        [2, 4],
        [3, 2],
      ],
      { op: 'linear', inputs: [0, 1], outputs: [2] },
      /Plan: op #0 linear: input \[3, 5\] is not a multiple of K = 4/,
    ],
    [
      'linear: wrong output size',
      [
        [2, 4],
        [3, 4],
        [2, 2],
      ],
      { op: 'linear', inputs: [0, 1], outputs: [2] },
      /Plan: op #0 linear: output has shape \[2, 2\] \(4 elements\), expected 6 elements/,
    ],
    ['linear: 1-D weight', [[2, 4], [4], [2, 1]], { op: 'linear', inputs: [0, 1], outputs: [2] }, /Plan: op #0 linear: weight must be 2-D \[N, K\], got \[4\]/],
    [
      'linear: K = 0',
      [
        [2, 0],
        [3, 0],
        [2, 3],
      ],
      { op: 'linear', inputs: [0, 1], outputs: [2] },
      /Plan: op #0 linear: input \[2, 0\] is not a multiple of K = 0/,
    ],
    [
      'linear: bias size',
      [[2, 4], [3, 4], [2], [2, 3]],
      { op: 'linear', inputs: [0, 1, 2], outputs: [3] },
      /Plan: op #0 linear: bias has shape \[2\] \(2 elements\), expected 3 elements/,
    ],
    [
      'linear: matmulDtype 2',
      [
        [2, 4],
        [3, 4],
        [2, 3],
      ],
      { op: 'linear', inputs: [0, 1], outputs: [2], attrs: { matmulDtype: 2 } },
      /Plan: op #0 linear: matmulDtype must be 0 \(float32\) or 1 \(bfloat16\)/,
    ],
    [
      'linear: act 3',
      [
        [2, 4],
        [3, 4],
        [2, 3],
      ],
      { op: 'linear', inputs: [0, 1], outputs: [2], attrs: { act: 3 } },
      /Plan: op #0 linear: act must be 0 \(none\), 1 \(gelu_tanh\) or 2 \(silu\)/,
    ],
    [
      'attention: matmulDtype -1',
      [
        [1, 2, 8],
        [1, 3, 8],
        [1, 3, 8],
        [1, 2, 8],
      ],
      { op: 'attention', inputs: [0, 1, 2], outputs: [3], attrs: att({ matmulDtype: -1 }) },
      /Plan: op #0 attention: matmulDtype must be 0 \(float32\) or 1 \(bfloat16\)/,
    ],
    [
      'attention: v size ≠ k size',
      [
        [1, 2, 8],
        [1, 3, 8],
        [1, 2, 8],
        [1, 2, 8],
      ],
      { op: 'attention', inputs: [0, 1, 2], outputs: [3], attrs: att() },
      /Plan: op #0 attention: v has shape \[1, 2, 8\] \(16 elements\), expected 24 elements/,
    ],
    [
      'attention: q not [B, Lq, H·D]',
      [
        [1, 3, 6],
        [1, 3, 8],
        [1, 3, 8],
        [1, 3, 6],
      ],
      { op: 'attention', inputs: [0, 1, 2], outputs: [3], attrs: att() },
      /Plan: op #0 attention: q \[1, 3, 6\] is not \[B=1, Lq, H·D=8\]/,
    ],
    [
      'attention: no keys',
      [[1, 2, 8], [0], [0], [1, 2, 8]],
      { op: 'attention', inputs: [0, 1, 2], outputs: [3], attrs: att() },
      /Plan: op #0 attention: k has no keys/,
    ],
    [
      'attention: bias size',
      [
        [1, 2, 8],
        [1, 3, 8],
        [1, 3, 8],
        [1, 2, 8],
        [1, 2, 2, 2],
      ],
      { op: 'attention', inputs: [0, 1, 2, 4], outputs: [3], attrs: att() },
      /Plan: op #0 attention: bias \[1, 2, 2, 2\] must be \[1 or B, H, Lq=2, Lk=3\]/,
    ],
    [
      'attention: zero heads',
      [
        [1, 2, 8],
        [1, 3, 8],
        [1, 3, 8],
        [1, 2, 8],
      ],
      { op: 'attention', inputs: [0, 1, 2], outputs: [3], attrs: att({ heads: 0 }) },
      /Plan: op #0 attention: attribute 'heads' must be an integer in \[1, 2\^31\), got 0/,
    ],
    [
      'attention: no scale',
      [
        [1, 2, 8],
        [1, 3, 8],
        [1, 3, 8],
        [1, 2, 8],
      ],
      { op: 'attention', inputs: [0, 1, 2], outputs: [3], attrs: { batch: 1, heads: 2, headDim: 4 } },
      /Plan: op #0 attention: attribute 'scale' must be a number/,
    ],
    [
      'attention: NaN scale',
      [
        [1, 2, 8],
        [1, 3, 8],
        [1, 3, 8],
        [1, 2, 8],
      ],
      { op: 'attention', inputs: [0, 1, 2], outputs: [3], attrs: att({ scale: NaN }) },
      /Plan: op #0 attention: attribute 'scale' must be finite/,
    ],
    [
      'attention: fractional heads',
      [
        [1, 2, 8],
        [1, 3, 8],
        [1, 3, 8],
        [1, 2, 8],
      ],
      { op: 'attention', inputs: [0, 1, 2], outputs: [3], attrs: att({ heads: 1.5 }) },
      /Plan: op #0 attention: attribute 'heads' must be an integer/,
    ],
    [
      'modulate: wrong e size',
      [
        [1, 4, 8],
        [1, 1, 6, 4],
        [1, 4, 8],
      ],
      { op: 'modulate', inputs: [0, 1], outputs: [2], attrs: mod() },
      /Plan: op #0 modulate: modulation e \[B, G, eChunks, N\] has shape \[1, 1, 6, 4\] \(24 elements\), expected 48 elements/,
    ],
    [
      'modulate: L not split into groups',
      [
        [1, 5, 8],
        [1, 2, 6, 8],
        [1, 5, 8],
      ],
      { op: 'modulate', inputs: [0, 1], outputs: [2], attrs: mod({ groups: 2 }) },
      /Plan: op #0 modulate: L = 5 tokens do not split into 2 groups/,
    ],
    [
      'modulate: shift index ≥ chunks',
      [
        [1, 4, 8],
        [1, 1, 6, 8],
        [1, 4, 8],
      ],
      { op: 'modulate', inputs: [0, 1], outputs: [2], attrs: mod({ shift: 6 }) },
      /Plan: op #0 modulate: attribute 'shift' = 6 is outside \[0, 6\)/,
    ],
    [
      'gated_add: residual size',
      [
        [1, 4, 8],
        [1, 4, 7],
        [1, 4, 8],
      ],
      { op: 'gated_add', inputs: [0, 1], outputs: [2] },
      /Plan: op #0 gated_add: residual has shape \[1, 4, 7\]/,
    ],
    [
      'gated_add: gate index ≥ chunks',
      [
        [1, 4, 8],
        [1, 4, 8],
        [1, 1, 2, 8],
        [1, 4, 8],
      ],
      { op: 'gated_add', inputs: [0, 1, 2], outputs: [3], attrs: { batch: 1, groups: 1, chunks: 2, gate: 2 } },
      /Plan: op #0 gated_add: attribute 'gate' = 2 is outside \[0, 2\)/,
    ],
    [
      'rope: odd headDim',
      [
        [1, 2, 1, 3],
        [2, 1],
        [2, 1],
        [1, 2, 1, 3],
      ],
      { op: 'rope', inputs: [0, 1, 2], outputs: [3], attrs: { batch: 1, heads: 1, headDim: 3 } },
      /Plan: op #0 rope: headDim must be even/,
    ],
    [
      'rope: cos size',
      [
        [1, 2, 1, 4],
        [2, 3],
        [2, 2],
        [1, 2, 1, 4],
      ],
      { op: 'rope', inputs: [0, 1, 2], outputs: [3], attrs: { batch: 1, heads: 1, headDim: 4 } },
      /Plan: op #0 rope: cos \[L, D\/2\] has shape \[2, 3\]/,
    ],
    [
      'layer_norm: weight size',
      [[3, 8], [7], [3, 8]],
      { op: 'layer_norm', inputs: [0, 1], outputs: [2], attrs: { eps: 1e-5 } },
      /Plan: op #0 layer_norm: weight has shape \[7\]/,
    ],
    [
      'layer_norm: negative eps',
      [
        [3, 8],
        [3, 8],
      ],
      { op: 'layer_norm', inputs: [0], outputs: [1], attrs: { eps: -1 } },
      /Plan: op #0 layer_norm: eps must be finite and ≥ 0/,
    ],
    [
      'layer_norm: empty last dim',
      [
        [3, 0],
        [3, 0],
      ],
      { op: 'layer_norm', inputs: [0], outputs: [1], attrs: { eps: 1e-5 } },
      /Plan: op #0 layer_norm: input \[3, 0\] has an empty last dim/,
    ],
    [
      'rms_norm: bias size',
      [[3, 8], [8], [9], [3, 8]],
      { op: 'rms_norm', inputs: [0, 1, 2], outputs: [3], attrs: { eps: 1e-5, l2: 1 } },
      /Plan: op #0 rms_norm: bias has shape \[9\]/,
    ],
    [
      'gelu_tanh: output size',
      [
        [3, 8],
        [3, 7],
      ],
      { op: 'gelu_tanh', inputs: [0], outputs: [1] },
      /Plan: op #0 gelu_tanh: output has shape \[3, 7\]/,
    ],
    [
      'add: size does not divide',
      [[6], [4], [6]],
      { op: 'add', inputs: [0, 1], outputs: [2] },
      /Plan: op #0 add: cannot broadcast \[4\] over \[6\] \(size must divide\)/,
    ],
    ['mul: empty b', [[6], [0], [6]], { op: 'mul', inputs: [0, 1], outputs: [2] }, /Plan: op #0 mul: cannot broadcast \[0\] over \[6\]/],
    ['scale: no factor', [[6], [6]], { op: 'scale', inputs: [0], outputs: [1] }, /Plan: op #0 scale: attribute 'scale' must be a number/],
    [
      'embedding: 3-D table',
      [[4], [2, 3, 5], [4, 3]],
      { op: 'embedding', inputs: [0, 1], outputs: [2] },
      /Plan: op #0 embedding: table must be \[V, N\], got \[2, 3, 5\]/,
    ],
    [
      'permute: not a permutation',
      [[6], [6]],
      { op: 'permute', inputs: [0], outputs: [1], attrs: { dims: [2, 3], perm: [0, 0] } },
      /Plan: op #0 permute: perm is not a permutation/,
    ],
    [
      'permute: rank 9',
      [[1], [1]],
      { op: 'permute', inputs: [0], outputs: [1], attrs: { dims: [1, 1, 1, 1, 1, 1, 1, 1, 1], perm: [0, 1, 2, 3, 4, 5, 6, 7, 8] } },
      /Plan: op #0 permute: dims and perm must have the same rank 1\.\.8/,
    ],
    [
      'permute: fractional dim',
      [[6], [6]],
      { op: 'permute', inputs: [0], outputs: [1], attrs: { dims: [2.5, 2], perm: [1, 0] } },
      /Plan: op #0 permute: attribute 'dims' must hold integers/,
    ],
    [
      'permute: input size',
      [[7], [6]],
      { op: 'permute', inputs: [0], outputs: [1], attrs: { dims: [2, 3], perm: [1, 0] } },
      /Plan: op #0 permute: input has shape \[7\]/,
    ],
    [
      'upsample: input size',
      [
        [2, 3, 3, 4],
        [2, 6, 6, 4],
      ],
      { op: 'upsample_nearest2x', inputs: [0], outputs: [1], attrs: { frames: 2, height: 3, width: 4, channels: 4 } },
      /Plan: op #0 upsample_nearest2x: input \[F, H, W, C\] has shape \[2, 3, 3, 4\]/,
    ],
    [
      'conv3d: 4-D weight',
      [
        [1, 3, 3, 2],
        [4, 2, 3, 3],
        [1, 3, 3, 4],
      ],
      { op: 'conv3d', inputs: [0, 1], outputs: [2], attrs: { frames: 1, height: 3, width: 3 } },
      /Plan: op #0 conv3d: weight must be \[Co, Ci, kt, kh, kw\], got \[4, 2, 3, 3\]/,
    ],
    [
      'conv3d: even kernel',
      [
        [1, 3, 3, 2],
        [4, 2, 1, 2, 2],
        [1, 3, 3, 4],
      ],
      { op: 'conv3d', inputs: [0, 1], outputs: [2], attrs: { frames: 1, height: 3, width: 3 } },
      /Plan: op #0 conv3d: spatial kernel sizes must be odd/,
    ],
    [
      'conv3d: history size',
      [
        [1, 3, 3, 2],
        [4, 2, 3, 3, 3],
        [1, 3, 3, 2],
        [1, 3, 3, 4],
      ],
      { op: 'conv3d', inputs: [0, 1, -1, 2], outputs: [3], attrs: { frames: 1, height: 3, width: 3 } },
      /Plan: op #0 conv3d: history \[kt-1, H, W, Ci\] has shape \[1, 3, 3, 2\] \(18 elements\), expected 36 elements/,
    ],
    [
      'conv3d: input size',
      [
        [1, 3, 3, 3],
        [4, 2, 1, 1, 1],
        [1, 3, 3, 4],
      ],
      { op: 'conv3d', inputs: [0, 1], outputs: [2], attrs: { frames: 1, height: 3, width: 3 } },
      /Plan: op #0 conv3d: input \[F, H, W, Ci\] has shape \[1, 3, 3, 3\]/,
    ],
  ])('%s', (_name, shapes, op, re) => {
    expect(specError(slotSpec(shapes, [op])).message).toMatch(re);
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('PlanBuilder rejects bad shapes with OmniError OMNIRX_ERR_NATIVE naming the op', () => {
  test('checks done while recording (TypeScript side)', () => {
    const g = new PlanBuilder();
    const x = g.input('x', [2, 5]);
    const w = g.input('w', [3, 4]);
    expectNativeOmniError(
      syncFailure(() => g.linear(x, w, undefined, { label: 'ffn.up' })),
      /plan: linear ffn\.up: input \[2, 5\] does not end in K = 4/,
    );
    expectNativeOmniError(
      syncFailure(() => g.linear(x, g.input('w1', [20]), undefined)),
      /weight must be \[N, K\], got \[20\]/,
    );
    expectNativeOmniError(
      syncFailure(() => g.linear(g.input('x2', [2, 4]), w, g.input('b', [4]))),
      /linear\s+bias: shape \[4\] has 4 elements, expected 3/,
    );
    const q = g.input('q', [1, 2, 8]);
    const k = g.input('k', [1, 3, 8]);
    expectNativeOmniError(
      syncFailure(() => g.attention(q, k, g.input('v', [1, 2, 8]), { batch: 1, heads: 2, headDim: 4, scale: 1, label: 'self' })),
      /plan: attention self v: shape \[1, 2, 8\] has 16 elements, expected 24/,
    );
    expectNativeOmniError(
      syncFailure(() => g.add(x, g.input('c', [3]))),
      /plan: add\s+: cannot broadcast \[3\] over \[2, 5\]/,
    );
    expectNativeOmniError(
      syncFailure(() => g.input('bad', [2, -1])),
      /plan: bad dim -1 in \[2, -1\]/,
    );
    expectNativeOmniError(
      syncFailure(() => g.input('x', [1])),
      /slot 'x' is declared twice/,
    );
    expectNativeOmniError(
      syncFailure(() => g.slice(x, 5, [2, 3])),
      /view \[2, 3\] at 5 exceeds \[2, 5\]/,
    );
    expectNativeOmniError(
      syncFailure(() => g.permute(x, [3, 3], [1, 0])),
      /permute\s+: shape \[2, 5\] has 10 elements, expected 9/,
    );
  });

  const compileFails = (build: (g: PlanBuilder) => void, re: RegExp) => {
    const g = new PlanBuilder();
    build(g);
    let plan: CompiledPlan | undefined;
    try {
      plan = g.compile(native);
    } catch (e) {
      expectNativeOmniError(e, re);
      return;
    }
    plan.dispose();
    throw new Error('compile accepted the plan');
  };

  test('checks done by the addon at compile time', () => {
    compileFails((g) => {
      const x = g.input('x', [1, 4, 8]);
      g.output('y', g.modulate(x, g.input('e', [1, 1, 6, 4]), { batch: 1, groups: 1, chunks: 6, shift: 0, scale: 1, label: 'blk0.mod' }));
    }, /plan: compile: Plan: op #0 modulate 'blk0\.mod': modulation e \[B, G, eChunks, N\] has shape \[1, 1, 6, 4\] \(24 elements\), expected 48 elements/);
    compileFails((g) => {
      const x = g.input('x', [3, 8]);
      const h = g.gelu(x);
      g.output('y', g.layerNorm(h, 1e-5, g.input('w', [7]), undefined, 'ln1'));
    }, /plan: compile: Plan: op #1 layer_norm 'ln1': weight has shape \[7\]/);
    compileFails((g) => {
      g.output('y', g.rope(g.input('x', [1, 2, 1, 3]), g.input('c', [2, 1]), g.input('s', [2, 1]), { batch: 1, heads: 1, headDim: 3, label: 'rope' }));
    }, /op #0 rope 'rope': headDim must be even/);
    compileFails((g) => {
      const x = g.input('x', [1, 3, 3, 2]);
      g.output(
        'y',
        g.conv3d(x, g.input('w', [4, 2, 3, 3, 3]), undefined, { frames: 1, height: 3, width: 3 }, { history: g.input('h', [1, 3, 3, 2]), label: 'conv_in' }),
      );
    }, /op #0 conv3d 'conv_in': history \[kt-1, H, W, Ci\] has shape \[1, 3, 3, 2\]/);
    compileFails((g) => {
      g.output('y', g.embedding(g.input('ids', [4]), g.input('table', [2, 3, 5]), 'tok'));
    }, /op #0 embedding 'tok': table must be \[V, N\]/);
    compileFails((g) => {
      const t = createTensor(native, [2, 2], [1, 2, 3, 4]);
      const c = g.constant(t);
      t.dispose();
      g.output('y', g.scale(c, 2));
    }, /plan: compile: Plan: consts\[0\] was disposed/);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Integers the addon does not range-check (as of this writing). Each of the first six specs, once compiled, crashes
// or hangs the process when run (the first two already while compiling: SIGFPE), the last one silently binds the
// wrong slot, so the only acceptable behaviour is a compile error. None of them is ever run here.
describe('out-of-range integers in a spec are rejected at compile time (never run here)', () => {
  test('attention: batch·heads·headDim overflowing int64 must not divide by zero while compiling', () => {
    const spec = slotSpec(
      [[4], [4], [4], [4]],
      [{ op: 'attention', inputs: [0, 1, 2], outputs: [3], attrs: { batch: 2 ** 32, heads: 2 ** 32, headDim: 1, scale: 1 } }],
    );
    const r = compileIsolated(spec);
    expect(r.error).toMatch(/Plan: op #0 attention: /);
  });

  test('rope: batch·heads·headDim overflowing int64 must not divide by zero while compiling', () => {
    const spec = slotSpec([[4], [2], [2], [4]], [{ op: 'rope', inputs: [0, 1, 2], outputs: [3], attrs: { batch: 2 ** 32, heads: 2 ** 32, headDim: 2 } }]);
    const r = compileIsolated(spec);
    expect(r.error).toMatch(/Plan: op #0 rope: /);
  });

  test('modulate: a negative shift index (reads before e) is rejected, also through PlanBuilder', () => {
    const spec = slotSpec(
      [
        [1, 2, 4],
        [1, 1, 2, 4],
        [1, 2, 4],
      ],
      [{ op: 'modulate', inputs: [0, 1], outputs: [2], attrs: { batch: 1, groups: 1, chunks: 2, shift: -100000000, scale: 0 } }],
    );
    expect(specError(spec).message).toMatch(/Plan: op #0 modulate: /);
    const g = new PlanBuilder();
    g.output('y', g.modulate(g.input('x', [1, 2, 4]), g.input('e', [1, 1, 2, 4]), { batch: 1, groups: 1, chunks: 2, shift: 0, scale: -1 }));
    let plan: CompiledPlan | undefined;
    const e = syncFailure(() => {
      plan = g.compile(native);
    });
    plan?.dispose();
    expectNativeOmniError(e, /modulate/);
  });

  test('upsample_nearest2x: negative height and width whose product is positive are rejected', () => {
    const spec = slotSpec([[1], [4]], [{ op: 'upsample_nearest2x', inputs: [0], outputs: [1], attrs: { frames: 1, height: -1, width: -1, channels: 1 } }]);
    expect(specError(spec).message).toMatch(/Plan: op #0 upsample_nearest2x: /);
  });

  test('conv3d: negative height and width whose product is positive are rejected', () => {
    const spec = slotSpec([[1], [1, 1, 1, 1, 1], [1]], [{ op: 'conv3d', inputs: [0, 1], outputs: [2], attrs: { frames: 1, height: -1, width: -1 } }]);
    expect(specError(spec).message).toMatch(/Plan: op #0 conv3d: /);
  });

  test('permute: dims whose product wraps around int64 to the input size are rejected', () => {
    // (2³²+1)(2³²−1) ≡ −1 (mod 2⁶⁴), so this product ≡ 8: the numel check alone passes, the strides are huge.
    const A = 2 ** 32 + 1;
    const B = 2 ** 32 - 1;
    const spec = slotSpec([[8], [8]], [{ op: 'permute', inputs: [0], outputs: [1], attrs: { dims: [A, B, A, B, 2, 4], perm: [0, 1, 3, 4, 2, 5] } }]);
    expect(specError(spec).message).toMatch(/Plan: op #0 permute: /);
  });

  test('a value index of 2^32 is out of range (not truncated to slot 0)', () => {
    const spec: PlanSpec = {
      arenaFloats: 0,
      consts: [],
      slots: [[4], [4]],
      values: [
        { kind: 2, index: 2 ** 32, offset: 0, shape: [4] },
        { kind: 2, index: 1, offset: 0, shape: [4] },
      ],
      ops: [{ op: 'copy', inputs: [0], outputs: [1] }],
    };
    expect(specError(spec).message).toMatch(/values\[0\]: slot index out of range/);
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('run() with bad bindings', () => {
  function scalePlan(): CompiledPlan {
    const g = new PlanBuilder();
    g.segment('all');
    g.output('y', g.scale(g.input('x', [2, 3]), 2));
    return g.compile(native);
  }

  test('through CompiledPlan: missing, wrong-size, disposed and non-Tensor bindings, unknown segment', async () => {
    const plan = scalePlan();
    try {
      const x = tensor([2, 3], [1, 2, 3, 4, 5, 6]);
      const y = tensor([2, 3]);
      expectNativeOmniError(await failure(() => plan.run({ y })), /plan: run: no tensor bound for slot 'x'/);
      expectNativeOmniError(await failure(() => plan.run({ x, y: tensor([5]) })), /plan run: Plan\.run: binding 1 has 5 elements, the slot needs 6/);
      const gone = createTensor(native, [2, 3]);
      gone.dispose();
      expectNativeOmniError(await failure(() => plan.run({ x: gone, y })), /plan run: Plan\.run: binding 0 was disposed/);
      for (const bad of [{}, 42, null, new Float32Array(6), { data: new Float32Array(6), shape: [2, 3], numel: 6 }]) {
        expectNativeOmniError(await failure(() => plan.run({ x: bad as unknown as NativeTensor, y })), /plan run: Plan\.run: binding 0 is not a Tensor/);
      }
      expectNativeOmniError(await failure(() => plan.run({ x, y: Object.create(native.Tensor.prototype) as NativeTensor })), /plan run: /);
      expectNativeOmniError(await failure(() => plan.run({ x, y }, 'nope')), /plan: run: unknown segment 'nope'/);
      // After all of that the plan runs fine.
      await plan.run({ x, y }, 'all');
      expect(Array.from(y.data)).toEqual([2, 4, 6, 8, 10, 12]);
    } finally {
      plan.dispose();
    }
  });

  test('straight to the native plan: binding count, array type, segment range, a disposed plan', async () => {
    const p = new native.Plan(slotSpec([[3], [3]], [{ op: 'scale', inputs: [0], outputs: [1], attrs: { scale: -1 } }]));
    const x = tensor([3], [1, 2, 3]);
    const y = tensor([3]);
    expect(() => p.run([x])).toThrow(/Plan\.run: expected 2 bound tensors, got 1/);
    expect(() => p.run({ 0: x, 1: y } as unknown as NativeTensor[])).toThrow(/Plan\.run: bindings must be an array of Tensors/);
    expect(() => p.run([x, y], 0, 2)).toThrow(/Plan\.run: segment \[0, 2\) is outside \[0, 1\]/);
    expect(() => p.run([x, y], 1, 0)).toThrow(/Plan\.run: segment \[1, 0\) is outside \[0, 1\]/);
    expect(() => p.run([x, y], -1)).toThrow(/Plan\.run: segment \[\d+, 1\) is outside \[0, 1\]/);
    expect(() => p.run([x, y], 'a' as unknown as number)).toThrow(/number/i);
    await p.run([x, y], 1, 1); // an empty segment is fine
    expect(Array.from(y.data)).toEqual([0, 0, 0]);
    await p.run([x, y]);
    expect(Array.from(y.data)).toEqual([-1, -2, -3]);
    p.dispose();
    p.dispose();
    expect(p.numOps).toBe(0);
    expect(p.arenaBytes).toBe(0);
    expect(() => p.run([x, y])).toThrow(/Plan\.run: plan was disposed/);
  });

  test('bad embedding ids reject the run naming the position; the same plan then runs fine', async () => {
    const rng = new Rng(3);
    const [V, N] = [11, 6];
    const table = randn(rng, V * N);
    const g = new PlanBuilder();
    const emb = g.embedding(g.input('ids', [5]), g.constant(tensor([V, N], table)), 'tok');
    g.output('y', g.scale(emb, 2));
    const plan = g.compile(native);
    try {
      const y = tensor([5, N]);
      const cases: Array<[number[], RegExp]> = [
        [[1, 11, 2, 3, 4], /token id 11\.0* at position 1 is not an integer in \[0, 11\)/],
        [[1, 2, 3, 2.5, 4], /token id 2\.50* at position 3 is not an integer in \[0, 11\)/],
        [[-1, 2, 3, 4, 5], /token id -1\.0* at position 0 /],
        [[0, 1, 2, 3, NaN], /token id -?nan at position 4 /],
        [[0, 1, 2, 3, 1e9], /at position 4 /],
      ];
      for (const [ids, re] of cases) {
        const e = await failure(() => plan.run({ ids: tensor([5], ids), y }));
        expectNativeOmniError(e, /plan run: op #0 embedding 'tok': embedding: /);
        expect(e.message).toMatch(re);
      }
      const good = [10, 0, 3, 3, 7];
      await plan.run({ ids: tensor([5], good), y });
      const want = ref.scale(ref.embedding(good, table, N), 2);
      expect(Array.from(y.data)).toEqual(Array.from(Float32Array.from(want)));
    } finally {
      plan.dispose();
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------
describe('native memory accounting', () => {
  test('bytesInUse returns to its previous value after a test that allocates, fails and disposes', async () => {
    const start = native.stats();
    const rng = new Rng(4);
    const w = tensor([32, 64], randn(rng, 32 * 64));
    const g = new PlanBuilder();
    const x = g.input('x', [50, 64]);
    const h = g.linear(x, g.constant(w), undefined, { act: 'silu' });
    g.output('y', g.layerNorm(g.add(h, g.scale(h, 0.5)), 1e-5));
    const plan = g.compile(native);
    expect(plan.arenaBytes).toBeGreaterThan(0);
    const xt = tensor([50, 64], randn(rng, 50 * 64));
    const yt = tensor([50, 32]);
    await plan.run({ x: xt, y: yt });
    void yt.data; // a live ArrayBuffer view must not pin the memory after dispose
    await failure(() => plan.run({ x: tensor([3]), y: yt }));
    specError(slotSpec([[2], [2]], [{ op: 'nope', inputs: [0], outputs: [1] }]));
    expect(() => new native.Tensor([65536, 65536, 2])).toThrow();
    expect(native.stats().bytesInUse).toBeGreaterThan(start.bytesInUse);
    plan.dispose();
    disposeAll();
    expect(native.stats().bytesInUse).toBe(start.bytesInUse);
    expect(native.stats().buffers).toBe(start.buffers);
  });
});
