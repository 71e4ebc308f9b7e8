import { OmniError } from '../errors';
import type { NativeBinding, NativePlan, NativeTensor, PlanOpSpec, PlanValueSpec } from './binding';
import { callNative } from './native-error';
import { planArena, type Interval } from './arena-planner';

/** A symbolic tensor in a plan being recorded. */
export interface Value {
  readonly id: number;
  readonly shape: readonly number[];
}

interface ValueRecord {
  shape: number[];
  numel: number;
  /** The value whose storage this one aliases (itself for a base). */
  base: number;
  /** Offset in floats inside the base. */
  offset: number;
  storage: { kind: 'arena' } | { kind: 'const'; index: number } | { kind: 'slot'; index: number };
  defOp: number;
  lastUse: number;
}

export type ActivationName = 'none' | 'gelu_tanh' | 'silu';

/** Shape of an adaLN modulation operand (see `PlanBuilder.modulate`). */
export interface ModulationOpts {
  batch: number;
  groups: number;
  chunks: number;
  /** Chunks stored in e: `chunks` (default) or 1. */
  eChunks?: number;
  table?: Value;
  label?: string;
}

function modulationAttrs(o: ModulationOpts): Record<string, number> {
  return { batch: o.batch, groups: o.groups, chunks: o.chunks, eChunks: o.eChunks ?? o.chunks };
}
const ACT: Record<ActivationName, number> = { none: 0, gelu_tanh: 1, silu: 2 };

/** Operand dtype of a matrix product (linear, attention): float32, or bfloat16 with float32 accumulation. */
export const MATMUL_DTYPES = ['float32', 'bfloat16'] as const;
export type MatmulDtype = (typeof MATMUL_DTYPES)[number];
/** Whether `v` names a matmul dtype (for command-line values). */
export function isMatmulDtype(v: unknown): v is MatmulDtype {
  return (MATMUL_DTYPES as readonly unknown[]).includes(v);
}
const MATMUL_DTYPE: Record<MatmulDtype, number> = { float32: 0, bfloat16: 1 };

function numelOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

function fail(message: string): never {
  throw new OmniError('OMNIRX_ERR_NATIVE', `plan: ${message}`);
}

function sameNumel(a: Value, n: number, what: string): void {
  const m = numelOf(a.shape);
  if (m !== n) fail(`${what}: shape [${a.shape.join(', ')}] has ${m} elements, expected ${n}`);
}

/** A compiled plan with named slots and segments. */
export class CompiledPlan {
  constructor(
    private readonly plan: NativePlan,
    /** Slot names in binding order, with their shapes. */
    readonly slots: ReadonlyArray<{ name: string; shape: readonly number[] }>,
    /** Named op ranges [from, to) marked with `PlanBuilder.segment`. */
    readonly segments: ReadonlyArray<{ name: string; from: number; to: number }>,
  ) {}

  get numOps(): number {
    return this.plan.numOps;
  }

  get arenaBytes(): number {
    return this.plan.arenaBytes;
  }

  /**
   * Runs the whole plan (or the named segment) with `bindings` for every slot. Runs of one plan are serialized
   * by the executor; a caller that runs several segments in a row must not interleave other runs of the same
   * plan, because intermediates stay in the shared arena between segments.
   * @throws (rejects with) OmniError OMNIRX_ERR_NATIVE for a missing binding, a wrong size or a kernel failure.
   */
  async run(bindings: Readonly<Record<string, NativeTensor>>, segment?: string): Promise<void> {
    const ordered = this.slots.map((s) => {
      const t = bindings[s.name];
      if (t === undefined) fail(`run: no tensor bound for slot '${s.name}'`);
      return t;
    });
    let from: number | undefined;
    let to: number | undefined;
    if (segment !== undefined) {
      const seg = this.segments.find((s) => s.name === segment);
      if (seg === undefined) fail(`run: unknown segment '${segment}'`);
      from = seg.from;
      to = seg.to;
    }
    return callNative('plan run', () => this.plan.run(ordered, from, to));
  }

  dispose(): void {
    this.plan.dispose();
  }
}

/**
 * Records a model's forward pass as a plan of native ops (docs/design.md §6). Model code calls the op methods once per
 * shape bucket; `compile` lays intermediates out in one arena (values whose lifetimes do not overlap share
 * memory) and hands a plain spec to the addon, which validates every op once. Shapes are checked here first so a
 * mistake names the op in TypeScript terms.
 */
export class PlanBuilder {
  private readonly values: ValueRecord[] = [];
  private readonly ops: PlanOpSpec[] = [];
  private readonly consts: NativeTensor[] = [];
  private readonly constIndex = new Map<NativeTensor, number>();
  private readonly slots: Array<{ name: string; shape: number[] }> = [];
  private readonly segmentMarks: Array<{ name: string; from: number }> = [];

  /** A per-run input slot of `shape`. */
  input(name: string, shape: readonly number[]): Value {
    return this.addSlotValue(name, shape);
  }

  /** A constant operand bound at compile time (weights, tables). The plan keeps the tensor's memory alive. */
  constant(tensor: NativeTensor): Value {
    let index = this.constIndex.get(tensor);
    if (index === undefined) {
      index = this.consts.length;
      this.consts.push(tensor);
      this.constIndex.set(tensor, index);
    }
    return this.addValue({ shape: [...tensor.shape], storage: { kind: 'const', index } });
  }

  /** Marks `value` as the per-run output slot `name`: the op that produces it writes straight into the slot. */
  output(name: string, value: Value): void {
    const rec = this.values[value.id];
    const base = this.values[rec.base];
    if (base.storage.kind !== 'arena' || rec.numel !== base.numel) {
      const copy = this.addSlotValue(name, value.shape);
      this.pushOp('copy', [value], copy, {}, `output ${name}`);
      return;
    }
    base.storage = { kind: 'slot', index: this.slots.length };
    this.slots.push({ name, shape: [...value.shape] });
  }

  /**
   * Copies `src` into `dst`, a view of a per-run slot (`slice` of an `input`): an in-place update of memory the caller
   * owns, e.g. a chunk's keys written into a KV cache's scratch frames, which later ops of the plan then read.
   */
  writeInto(dst: Value, src: Value, label?: string): void {
    const base = this.values[this.values[dst.id].base];
    if (base.storage.kind !== 'slot') fail(`writeInto ${label ?? ''}: the destination must be a view of an input slot`);
    sameNumel(src, numelOf(dst.shape), `writeInto ${label ?? ''}`);
    this.pushOp('copy', [src], dst, {}, label);
  }

  /** Starts a named segment at the next op (segments run with `CompiledPlan.run(bindings, name)`). */
  segment(name: string): void {
    this.segmentMarks.push({ name, from: this.ops.length });
  }

  /** A view of `v` with a new shape and the same number of elements (no copy). */
  reshape(v: Value, shape: readonly number[]): Value {
    return this.slice(v, 0, shape);
  }

  /** A contiguous view of `shape` starting `offset` floats into `v` (no copy). */
  slice(v: Value, offset: number, shape: readonly number[]): Value {
    const rec = this.values[v.id];
    const n = numelOf(shape);
    if (offset < 0 || offset + n > rec.numel) fail(`view [${shape.join(', ')}] at ${offset} exceeds [${rec.shape.join(', ')}]`);
    const base = this.values[rec.base];
    const id = this.values.length;
    this.values.push({ shape: [...shape], numel: n, base: rec.base, offset: rec.offset + offset, storage: base.storage, defOp: base.defOp, lastUse: -1 });
    return { id, shape: [...shape] };
  }

  // ---- ops -------------------------------------------------------------------------------------------------

  /**
   * y = act(x · wᵀ + b) for x [..., K], w [N, K] (nn.Linear layout), b [N] → y [..., N], float32 in and out.
   * `matmulDtype: 'bfloat16'` packs w as bf16 and rounds x to bf16 inside the GEMM, accumulating in float32
   * (AVX512_BF16 VDPBF16PS): about twice the float32 throughput; each operand is rounded with relative error ≤ 2⁻⁸ (bf16 keeps 8 significant bits). Where the CPU
   * lacks the instruction the same arithmetic runs in plain float32 code (same results, much slower).
   */
  linear(x: Value, w: Value, b: Value | undefined, opts: { act?: ActivationName; matmulDtype?: MatmulDtype; label?: string } = {}): Value {
    if (w.shape.length !== 2) fail(`linear ${opts.label ?? ''}: weight must be [N, K], got [${w.shape.join(', ')}]`);
    const [N, K] = w.shape;
    if (x.shape[x.shape.length - 1] !== K) fail(`linear ${opts.label ?? ''}: input [${x.shape.join(', ')}] does not end in K = ${K}`);
    if (b !== undefined) sameNumel(b, N, `linear ${opts.label ?? ''} bias`);
    const y = this.arenaValue([...x.shape.slice(0, -1), N]);
    this.pushOp('linear', [x, w, b], y, { act: ACT[opts.act ?? 'none'], matmulDtype: MATMUL_DTYPE[opts.matmulDtype ?? 'float32'] }, opts.label);
    return y;
  }

  /**
   * Scaled dot-product attention. q [B, Lq, H·D], k and v [B, Lk, H·D] → [B, Lq, H·D]; optional additive bias
   * [1 or B, H, Lq, Lk] (relative position bias, padding masks with −inf). `matmulDtype: 'bfloat16'` runs Q·Kᵀ and
   * P·V on the bf16 GEMM path (q, k, v and the softmax probabilities rounded to bf16, float32 accumulation; the
   * softmax stays float32).
   */
  attention(
    q: Value,
    k: Value,
    v: Value,
    opts: { batch: number; heads: number; headDim: number; scale: number; bias?: Value; matmulDtype?: MatmulDtype; label?: string },
  ): Value {
    const row = opts.batch * opts.heads * opts.headDim;
    if (numelOf(q.shape) % row !== 0 || numelOf(k.shape) % row !== 0) fail(`attention ${opts.label ?? ''}: q/k are not [B, L, H·D]`);
    sameNumel(v, numelOf(k.shape), `attention ${opts.label ?? ''} v`);
    const y = this.arenaValue(q.shape);
    this.pushOp(
      'attention',
      [q, k, v, opts.bias],
      y,
      { batch: opts.batch, heads: opts.heads, headDim: opts.headDim, scale: opts.scale, matmulDtype: MATMUL_DTYPE[opts.matmulDtype ?? 'float32'] },
      opts.label,
    );
    return y;
  }

  /** LayerNorm over the last dim; `w`/`b` optional (elementwise_affine). */
  layerNorm(x: Value, eps: number, w?: Value, b?: Value, label?: string): Value {
    const y = this.arenaValue(x.shape);
    this.pushOp('layer_norm', [x, w, b], y, { eps }, label);
    return y;
  }

  /** RMSNorm over the last dim; `l2` selects the F.normalize·sqrt(N) form of Wan's VAE. */
  rmsNorm(x: Value, eps: number, w?: Value, opts: { l2?: boolean; b?: Value; label?: string } = {}): Value {
    const y = this.arenaValue(x.shape);
    this.pushOp('rms_norm', [x, w, opts.b], y, { eps, l2: opts.l2 ? 1 : 0 }, opts.label);
    return y;
  }

  gelu(x: Value, label?: string): Value {
    return this.unary('gelu_tanh', x, label);
  }

  silu(x: Value, label?: string): Value {
    return this.unary('silu', x, label);
  }

  /** a + b, with b broadcast over leading rows when its size divides a's. */
  add(a: Value, b: Value, label?: string): Value {
    const na = numelOf(a.shape);
    const nb = numelOf(b.shape);
    if (nb === 0 || na % nb !== 0) fail(`add ${label ?? ''}: cannot broadcast [${b.shape.join(', ')}] over [${a.shape.join(', ')}]`);
    const y = this.arenaValue(a.shape);
    this.pushOp('add', [a, b], y, {}, label);
    return y;
  }

  /** a · b elementwise, with b broadcast over leading rows when its size divides a's. */
  mul(a: Value, b: Value, label?: string): Value {
    const na = numelOf(a.shape);
    const nb = numelOf(b.shape);
    if (nb === 0 || na % nb !== 0) fail(`mul ${label ?? ''}: cannot broadcast [${b.shape.join(', ')}] over [${a.shape.join(', ')}]`);
    const y = this.arenaValue(a.shape);
    this.pushOp('mul', [a, b], y, {}, label);
    return y;
  }

  scale(a: Value, s: number, label?: string): Value {
    const y = this.arenaValue(a.shape);
    this.pushOp('scale', [a], y, { scale: s }, label);
    return y;
  }

  /**
   * adaLN modulation x · (1 + m_scale) + m_shift for x [B, L, N], where chunk k of the modulation of group g is
   * e[b, g, k] + table[k]: e [B, G, eChunks, N] (eChunks = chunks, or 1 to broadcast one vector over the chunks),
   * table [chunks, N] optional (Wan's `scale_shift_table`).
   */
  modulate(x: Value, e: Value, opts: ModulationOpts & { shift: number; scale: number }): Value {
    const y = this.arenaValue(x.shape);
    this.pushOp('modulate', [x, e, opts.table], y, { ...modulationAttrs(opts), shift: opts.shift, scale: opts.scale }, opts.label);
    return y;
  }

  /** x + r · m_gate (modulation as in `modulate`), or x + r without a gate. */
  gatedAdd(x: Value, r: Value, gate?: ModulationOpts & { e: Value; index: number }, label?: string): Value {
    sameNumel(r, numelOf(x.shape), `gated_add ${label ?? ''} residual`);
    const y = this.arenaValue(x.shape);
    const attrs: Record<string, number> = gate === undefined ? {} : { ...modulationAttrs(gate), gate: gate.index };
    this.pushOp('gated_add', [x, r, gate?.e, gate?.table], y, attrs, label ?? gate?.label);
    return y;
  }

  /** Interleaved-pair rotary embedding: x [B, L, H, D] with cos/sin [L, D/2]. */
  rope(x: Value, cos: Value, sin: Value, opts: { batch: number; heads: number; headDim: number; label?: string }): Value {
    const y = this.arenaValue(x.shape);
    this.pushOp('rope', [x, cos, sin], y, { batch: opts.batch, heads: opts.heads, headDim: opts.headDim }, opts.label);
    return y;
  }

  /** Row gather: ids [L] (float32 integers) from table [V, N] → [L, N]. */
  embedding(ids: Value, table: Value, label?: string): Value {
    const y = this.arenaValue([numelOf(ids.shape), table.shape[1]]);
    this.pushOp('embedding', [ids, table], y, {}, label);
    return y;
  }

  /** Transposes `x` viewed as `dims` by `perm` (output axis i takes input axis perm[i]). */
  permute(x: Value, dims: readonly number[], perm: readonly number[], label?: string): Value {
    sameNumel(x, numelOf(dims), `permute ${label ?? ''}`);
    const y = this.arenaValue(perm.map((p) => dims[p]));
    this.pushOp('permute', [x], y, { dims: [...dims], perm: [...perm] }, label);
    return y;
  }

  /** Nearest 2× spatial upsample of channels-last frames [F, H, W, C] → [F, 2H, 2W, C]. */
  upsample2x(x: Value, dims: { frames: number; height: number; width: number; channels: number }, label?: string): Value {
    const y = this.arenaValue([dims.frames, dims.height * 2, dims.width * 2, dims.channels]);
    this.pushOp('upsample_nearest2x', [x], y, { ...dims }, label);
    return y;
  }

  /** Causal 3D conv, channels-last [F, H, W, Ci] → [F, H, W, Co], weight [Co, Ci, kt, kh, kw]. */
  conv3d(
    x: Value,
    w: Value,
    b: Value | undefined,
    dims: { frames: number; height: number; width: number },
    opts: { history?: Value; label?: string } = {},
  ): Value {
    if (w.shape.length !== 5) fail(`conv3d ${opts.label ?? ''}: weight must be [Co, Ci, kt, kh, kw]`);
    const y = this.arenaValue([dims.frames, dims.height, dims.width, w.shape[0]]);
    this.pushOp('conv3d', [x, w, b, opts.history], y, { ...dims }, opts.label);
    return y;
  }

  // ---- compile ---------------------------------------------------------------------------------------------

  /**
   * Lays out the arena and compiles the plan in the addon.
   * @throws OmniError OMNIRX_ERR_NATIVE when the addon rejects an op (the message names the op and its label).
   */
  compile(native: NativeBinding): CompiledPlan {
    const intervals: Interval[] = [];
    for (let id = 0; id < this.values.length; id++) {
      const rec = this.values[id];
      if (rec.base === id && rec.storage.kind === 'arena')
        intervals.push({ id, size: rec.numel, start: rec.defOp, end: rec.lastUse < 0 ? rec.defOp : rec.lastUse });
    }
    const { offsets, total } = planArena(intervals);
    const values: PlanValueSpec[] = this.values.map((rec) => {
      const base = this.values[rec.base];
      const storage = base.storage;
      const kind = storage.kind === 'arena' ? 0 : storage.kind === 'const' ? 1 : 2;
      const index = storage.kind === 'arena' ? 0 : storage.index;
      const offset = (storage.kind === 'arena' ? (offsets.get(rec.base) ?? 0) : 0) + rec.offset;
      return { kind, index, offset, shape: rec.shape };
    });
    const segments = this.segmentMarks.map((m, i) => ({
      name: m.name,
      from: m.from,
      to: i + 1 < this.segmentMarks.length ? this.segmentMarks[i + 1].from : this.ops.length,
    }));
    let plan: NativePlan;
    try {
      plan = new native.Plan({ arenaFloats: total, consts: this.consts, slots: this.slots.map((s) => s.shape), values, ops: this.ops });
    } catch (e) {
      fail(`compile: ${(e as Error).message}`);
    }
    return new CompiledPlan(plan, this.slots, segments);
  }

  // ---- internals -------------------------------------------------------------------------------------------

  private unary(op: string, x: Value, label?: string): Value {
    const y = this.arenaValue(x.shape);
    this.pushOp(op, [x], y, {}, label);
    return y;
  }

  private addValue(init: { shape: readonly number[]; storage: ValueRecord['storage'] }): Value {
    for (const d of init.shape) if (!Number.isSafeInteger(d) || d < 0) fail(`bad dim ${d} in [${init.shape.join(', ')}]`);
    const id = this.values.length;
    this.values.push({ shape: [...init.shape], numel: numelOf(init.shape), base: id, offset: 0, storage: init.storage, defOp: this.ops.length, lastUse: -1 });
    return { id, shape: [...init.shape] };
  }

  private addSlotValue(name: string, shape: readonly number[]): Value {
    if (this.slots.some((s) => s.name === name)) fail(`slot '${name}' is declared twice`);
    const v = this.addValue({ shape, storage: { kind: 'slot', index: this.slots.length } });
    this.slots.push({ name, shape: [...shape] });
    return v;
  }

  private arenaValue(shape: readonly number[]): Value {
    return this.addValue({ shape, storage: { kind: 'arena' } });
  }

  private pushOp(op: string, inputs: Array<Value | undefined>, output: Value, attrs: Record<string, number | number[]>, label?: string): void {
    const index = this.ops.length;
    for (const v of inputs) {
      if (v === undefined) continue;
      const base = this.values[this.values[v.id].base];
      base.lastUse = Math.max(base.lastUse, index);
    }
    const out = this.values[this.values[output.id].base];
    out.defOp = index;
    out.lastUse = Math.max(out.lastUse, index);
    this.ops.push({ op, label, inputs: inputs.map((v) => (v === undefined ? -1 : v.id)), outputs: [output.id], attrs });
  }
}
