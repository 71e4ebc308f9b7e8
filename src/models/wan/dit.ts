import type { NativeBinding, NativeTensor } from '../../native/binding';
import { createTensor } from '../../native/binding';
import { LruCache } from '../../native/lru-cache';
import { CompiledPlan, PlanBuilder, type MatmulDtype } from '../../native/plan-builder';
import type { ParamSpec, WeightStore } from '../weights/weight-store';
import type { WanDiTConfig } from './config';
import { writeChunkActions, type ChunkActions } from '../action-module';
import { ditPlanOps, recordConditionEmbeddings, recordDiTBlock, recordDiTHead, type DiTActionInputs } from './dit-blocks';
import { timestepEmbedding, wanRopeTables } from './rope';

/** Shape bucket of one forward: `batch` samples of channels-first latents `[C, F, H, W]` and the text length. */
export interface DiTShape {
  batch: number;
  frames: number;
  height: number;
  width: number;
  textLen: number;
}

/**
 * Parameter names (diffusers `WanTransformer3DModel`) and shapes, plus the action module's
 * (`condition_embedder.action_embedder.*`, appended last) when `c.action` is set.
 */
export function wanDiTParams(c: WanDiTConfig): ParamSpec[] {
  const [pt, ph, pw] = c.patchSize;
  const d = c.dim;
  const lin = (name: string, out: number, inp: number, bias = true): ParamSpec[] => [
    { name: `${name}.weight`, shape: [out, inp], init: 'normal', std: inp ** -0.5 },
    ...(bias ? [{ name: `${name}.bias`, shape: [out], init: 'zeros' as const }] : []),
  ];
  const p: ParamSpec[] = [
    { name: 'patch_embedding.weight', shape: [d, c.inChannels, pt, ph, pw], init: 'normal', std: (c.inChannels * pt * ph * pw) ** -0.5 },
    { name: 'patch_embedding.bias', shape: [d], init: 'zeros' },
    ...lin('condition_embedder.time_embedder.linear_1', d, c.freqDim),
    ...lin('condition_embedder.time_embedder.linear_2', d, d),
    ...lin('condition_embedder.time_proj', 6 * d, d),
    ...lin('condition_embedder.text_embedder.linear_1', d, c.textDim),
    ...lin('condition_embedder.text_embedder.linear_2', d, d),
  ];
  for (let i = 0; i < c.numLayers; i++) {
    const b = `blocks.${i}`;
    for (const a of ['attn1', 'attn2']) {
      for (const n of ['to_q', 'to_k', 'to_v', 'to_out.0']) p.push(...lin(`${b}.${a}.${n}`, d, d));
      p.push({ name: `${b}.${a}.norm_q.weight`, shape: [d], init: 'ones' }, { name: `${b}.${a}.norm_k.weight`, shape: [d], init: 'ones' });
    }
    p.push({ name: `${b}.norm2.weight`, shape: [d], init: 'ones' }, { name: `${b}.norm2.bias`, shape: [d], init: 'zeros' });
    p.push(...lin(`${b}.ffn.net.0.proj`, c.ffnDim, d), ...lin(`${b}.ffn.net.2`, d, c.ffnDim));
    p.push({ name: `${b}.scale_shift_table`, shape: [1, 6, d], init: 'normal', std: d ** -0.5 });
  }
  p.push(...lin('proj_out', pt * ph * pw * c.outChannels, d));
  p.push({ name: 'scale_shift_table', shape: [1, 2, d], init: 'normal', std: d ** -0.5 });
  if (c.action !== undefined) {
    // Action module (see `recordActionEmbedding`): nn.Embedding table N(0, 0.02²), vector projection as any Linear.
    p.push({ name: 'condition_embedder.action_embedder.key_embedding.weight', shape: [c.action.numKeys, d], init: 'normal', std: 0.02 });
    if (c.action.vectorDim > 0) p.push(...lin('condition_embedder.action_embedder.vector_proj', d, c.action.vectorDim));
  }
  return p;
}

/** One sample of a batched forward: its latents `[C, F, H, W]`, text states `[Lt, textDim]`, timestep, output. */
export interface ForwardRow {
  latents: Float32Array;
  context: Float32Array;
  /** σ·1000. */
  t: number;
  /** Receives the velocity `[C, F, H, W]`. */
  out: Float32Array;
  /**
   * Per-latent-frame actions (F keys, vectors `[F, vectorDim]`), only for a model with an action module; omitted →
   * key 0 ("none") and zero vectors for every frame.
   */
  actions?: ChunkActions;
}

/** Caller-owned tensors of one `WanDiT.forward`. */
export interface DiTForwardIO {
  latents: NativeTensor;
  context: NativeTensor;
  /** Scratch `[B, freqDim]` the sinusoidal timestep features are written into. */
  timestep: NativeTensor;
  out: NativeTensor;
  /** Scratch `[B·F]` for the action key ids (required for a model with an action module). */
  actionKeys?: NativeTensor;
  /** Scratch `[B·F, vectorDim]` for the action vectors (required when the action module has vectorDim > 0). */
  actionVectors?: NativeTensor;
}

interface Staging {
  latents: NativeTensor;
  context: NativeTensor;
  timestep: NativeTensor;
  out: NativeTensor;
  actionKeys?: NativeTensor;
  actionVectors?: NativeTensor;
}

/**
 * The Wan DiT forward as a native plan: latents `[1, C, F, H, W]`, a timestep and text hidden states
 * `[1, Lt, textDim]` → flow velocity `[1, C_out, F, H, W]` (float32). Structure follows diffusers
 * `WanTransformer3DModel` / `WanTransformerBlock`: patch embedding (Conv3d with kernel = stride = patch), time
 * embedding → 6-way adaLN modulation per block (shift, scale, gate for self-attention and FFN), self-attention
 * with q/k RMSNorm across heads and 3D RoPE, text cross-attention after an affine LayerNorm, GELU-tanh FFN,
 * modulated output head and unpatchify. One plan per shape bucket, compiled on first use and cached.
 *
 * With an action module (`config.action`, temporal patch 1), the conditioning is per latent frame: frame f of
 * sample b is modulated by silu(temb_b + a_{b,f}) (a = `recordActionEmbedding`, plan inputs `action_keys` `[B·F]`
 * and `action_vectors` `[B·F, vectorDim]`), i.e. the block and head modulation use groups = F, as in `CausalWanDiT`.
 * Without one the plan is unchanged (one modulation row per sample).
 */
export class WanDiT {
  /** Compiled plans per shape bucket (LRU: a server that sees many sizes keeps its native memory bounded). */
  private readonly plans = new LruCache<{ plan: CompiledPlan; cos: NativeTensor; sin: NativeTensor }>(8, (e) => {
    e.plan.dispose();
    e.cos.dispose();
    e.sin.dispose();
  });
  /** Free staging tensors per shape bucket, reused across steps (fresh native memory is slow to touch). */
  private readonly staging = new LruCache<Staging[]>(8, (list) => {
    for (const st of list) for (const t of Object.values(st)) t.dispose();
  });

  constructor(
    private readonly native: NativeBinding,
    readonly config: WanDiTConfig,
    private readonly weights: WeightStore,
    /** Operand dtype of the linear layers' and attention's matrix products ('bfloat16': bf16 operands, float32 accumulation; about 2× the float32 GEMM throughput, operands rounded with relative error ≤ 2⁻⁸). */
    readonly matmulDtype: MatmulDtype = 'float32',
  ) {}

  /** Latent-space stride a width/height must divide by (the spatial patch size). */
  get spatialStride(): number {
    return Math.max(this.config.patchSize[1], this.config.patchSize[2]);
  }

  private build(s: DiTShape): { plan: CompiledPlan; cos: NativeTensor; sin: NativeTensor } {
    const c = this.config;
    const [pt, ph, pw] = c.patchSize;
    const d = c.dim;
    const D = d / c.numHeads;
    const Fp = s.frames / pt;
    const Hp = s.height / ph;
    const Wp = s.width / pw;
    const L = Fp * Hp * Wp;
    const patchFeat = c.inChannels * pt * ph * pw;
    const tables = wanRopeTables(Fp, Hp, Wp, D, c.ropeTheta);
    const cosT = createTensor(this.native, [L, D / 2], tables.cos);
    const sinT = createTensor(this.native, [L, D / 2], tables.sin);

    const g = new PlanBuilder();
    const ops = ditPlanOps(g, this.weights, this.matmulDtype);
    const { w } = ops;

    const B = s.batch;
    const latents = g.input('latents', [B, c.inChannels, s.frames, s.height, s.width]);
    const tfreq = g.input('timestep', [B, c.freqDim]);
    const context = g.input('context', [B, s.textLen, c.textDim]);
    const action = this.actionInputs(g, B * Fp);
    const cos = g.constant(cosT);
    const sin = g.constant(sinT);

    // Patch embedding: [B, C, F, H, W] → tokens [B·(f, h, w), (c, kt, kh, kw)] → Linear (= Conv3d, kernel = stride).
    const patches = g.permute(latents, [B, c.inChannels, Fp, pt, Hp, ph, Wp, pw], [0, 2, 4, 6, 1, 3, 5, 7], 'patchify');
    let x = g.linear(g.reshape(patches, [B, L, patchFeat]), w('patch_embedding.weight', [d, patchFeat]), w('patch_embedding.bias', [d]), { matmulDtype: ops.matmulDtype, label: 'patch_embedding' });

    const { temb, tproj, ctx } = recordConditionEmbeddings(ops, c, tfreq, context, action && { ...action, framesPerTimestep: Fp });
    // Modulation rows: one per sample (groups = 1), or one per latent frame with an action module (groups = F).
    const groups = action === undefined ? 1 : Fp;

    const attn = { batch: B, heads: c.numHeads, headDim: D, scale: 1 / Math.sqrt(D) };
    const rope = { batch: B, heads: c.numHeads, headDim: D };
    for (let i = 0; i < c.numLayers; i++) {
      const b = `blocks.${i}`;
      g.segment(b);
      // Six modulation chunks per group: time projection + the block's scale_shift_table.
      x = recordDiTBlock(ops, c, i, x, { tproj, ctx, batch: B, groups }, (n1, q, k) => {
        const v = ops.lin(n1, `${b}.attn1.to_v`, d, d);
        const qr = g.rope(q, cos, sin, { ...rope, label: `${b}.attn1.rope_q` });
        const kr = g.rope(k, cos, sin, { ...rope, label: `${b}.attn1.rope_k` });
        return g.attention(qr, kr, v, { ...attn, matmulDtype: ops.matmulDtype, label: `${b}.attn1` });
      });
    }
    g.segment('head');
    // Output head: shift, scale = scale_shift_table [2, d] + temb of the group (broadcast over both chunks).
    const out = recordDiTHead(ops, c, x, temb, { batch: B, groups }, pt * ph * pw * c.outChannels);
    // Unpatchify: [B, (f, h, w), (pt, ph, pw, c)] → [B, C, F, H, W].
    const video = g.permute(out, [B, Fp, Hp, Wp, pt, ph, pw, c.outChannels], [0, 7, 1, 4, 2, 5, 3, 6], 'unpatchify');
    g.output('velocity', video);
    return { plan: g.compile(this.native), cos: cosT, sin: sinT };
  }

  /** The action plan inputs for `rows` (sample, latent frame) rows, or undefined for a model without an action module. */
  private actionInputs(g: PlanBuilder, rows: number): Omit<DiTActionInputs, 'framesPerTimestep'> | undefined {
    const a = this.config.action;
    if (a === undefined) return undefined;
    return { keys: g.input('action_keys', [rows]), vectors: a.vectorDim > 0 ? g.input('action_vectors', [rows, a.vectorDim]) : undefined };
  }

  /** The compiled plan for a shape bucket (compiled on first use). */
  planFor(s: DiTShape): CompiledPlan {
    const key = `${s.batch}:${s.frames}x${s.height}x${s.width}:${s.textLen}`;
    return this.plans.getOrCreate(key, () => this.build(s)).plan;
  }

  /**
   * One forward over a batch: writes the velocity for `latents` [B, C, F, H, W] into `out` (same shape), sample b
   * at timestep `t[b]` (σ·1000) with text states `context` [B, Lt, textDim]. `timestep` is a caller-owned
   * `[B, freqDim]` scratch tensor the sinusoidal embeddings are written into. For a model with an action module,
   * `actions[b]` are sample b's per-latent-frame actions (omitted → all "none"), written into `io.actionKeys`
   * `[B·F]` / `io.actionVectors` `[B·F, vectorDim]`.
   * @throws RangeError for a wrong number of timesteps or action rows, or missing action scratch tensors; OmniError OMNIRX_ERR_UNSUPPORTED_VALUE for invalid actions
   *   (see `writeChunkActions`) or actions given to a model without an action module.
   */
  async forward(s: DiTShape, io: DiTForwardIO, t: readonly number[], actions?: ReadonlyArray<ChunkActions | undefined>): Promise<void> {
    if (t.length !== s.batch) throw new RangeError(`WanDiT.forward: ${t.length} timesteps for a batch of ${s.batch}`);
    if (actions !== undefined && actions.length !== s.batch) throw new RangeError(`WanDiT.forward: ${actions.length} action rows for a batch of ${s.batch}`);
    const f = this.config.freqDim;
    t.forEach((tb, b) => io.timestep.data.set(timestepEmbedding(tb, f), b * f));
    const bind: Record<string, NativeTensor> = { latents: io.latents, timestep: io.timestep, context: io.context, velocity: io.out };
    const a = this.config.action;
    if (a === undefined) {
      const b = actions?.findIndex((x) => x !== undefined) ?? -1;
      if (b >= 0) writeChunkActions(undefined, s.frames, actions?.[b], {}, `WanDiT.forward: sample ${b}`);
    } else {
      const F = s.frames;
      const keys = io.actionKeys;
      const vectors = io.actionVectors;
      if (keys === undefined || keys.numel !== s.batch * F || (a.vectorDim > 0 && vectors?.numel !== s.batch * F * a.vectorDim)) {
        throw new RangeError(`WanDiT.forward: a model with an action module needs actionKeys [${s.batch * F}]${a.vectorDim > 0 ? ` and actionVectors [${s.batch * F}, ${a.vectorDim}]` : ''}`);
      }
      for (let b = 0; b < s.batch; b++) {
        const out = { keys: keys.data.subarray(b * F, (b + 1) * F), vectors: vectors?.data.subarray(b * F * a.vectorDim, (b + 1) * F * a.vectorDim) };
        writeChunkActions(a, F, actions?.[b], out, `WanDiT.forward: sample ${b}`);
      }
      bind.action_keys = keys;
      if (vectors !== undefined && a.vectorDim > 0) bind.action_vectors = vectors;
    }
    await this.planFor(s).run(bind);
  }

  /**
   * Runs the rows as one batched forward (batch = rows.length): copies each row into staging tensors taken from a
   * per-shape free list, runs the plan, copies each velocity out. Rows are independent, so a row's result is the
   * same bits whether it runs alone or in a batch.
   */
  async forwardRows(shape: Omit<DiTShape, 'batch'>, rows: readonly ForwardRow[]): Promise<void> {
    const s: DiTShape = { ...shape, batch: rows.length };
    const c = this.config;
    const key = `${s.batch}:${s.frames}x${s.height}x${s.width}:${s.textLen}`;
    const free = this.staging.getOrCreate(key, () => []);
    const st = free.pop() ?? {
      latents: createTensor(this.native, [s.batch, c.inChannels, s.frames, s.height, s.width]),
      context: createTensor(this.native, [s.batch, s.textLen, c.textDim]),
      timestep: createTensor(this.native, [s.batch, c.freqDim]),
      out: createTensor(this.native, [s.batch, c.outChannels, s.frames, s.height, s.width]),
      ...(c.action === undefined
        ? {}
        : {
            actionKeys: createTensor(this.native, [s.batch * s.frames]),
            ...(c.action.vectorDim > 0 ? { actionVectors: createTensor(this.native, [s.batch * s.frames, c.action.vectorDim]) } : {}),
          }),
    };
    try {
      const lat = st.latents.data;
      const ctx = st.context.data;
      const per = lat.length / s.batch;
      const perCtx = ctx.length / s.batch;
      rows.forEach((r, b) => {
        if (r.latents.length !== per || r.context.length !== perCtx || r.out.length !== per) {
          throw new RangeError(`WanDiT.forwardRows: row ${b} has ${r.latents.length} latents / ${r.context.length} context values, expected ${per} / ${perCtx}`);
        }
        lat.set(r.latents, b * per);
        ctx.set(r.context, b * perCtx);
      });
      await this.forward(
        s,
        st,
        rows.map((r) => r.t),
        rows.map((r) => r.actions),
      );
      const out = st.out.data;
      rows.forEach((r, b) => r.out.set(out.subarray(b * per, (b + 1) * per)));
    } finally {
      free.push(st);
    }
  }

  dispose(): void {
    this.staging.clear();
    this.plans.clear();
  }
}
