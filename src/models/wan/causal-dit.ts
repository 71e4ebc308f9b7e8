import { OmniError } from '../../errors';
import { createTensor, type NativeBinding, type NativeTensor } from '../../native/binding';
import { CompiledPlan, PlanBuilder, type Value, type MatmulDtype } from '../../native/plan-builder';
import type { WeightStore } from '../weights/weight-store';
import { writeChunkActions, type ChunkActions } from '../action-module';
import type { WanDiTConfig } from './config';
import { ditPlanOps, recordCrossAttentionKV, recordDiTBlock, recordDiTHead, recordDiTSelfAttentionInputs, recordTextEmbedding, recordTimeEmbeddings } from './dit-blocks';
import { KVCache } from './kv-cache';
import { timestepEmbedding, wanRopeTables } from './rope';

/** Chunking and latent geometry of one autoregressive rollout (see `CausalWanDiT`). */
export interface CausalRolloutConfig {
  /** C: latent frames per chunk (denoised together, full attention inside the chunk). */
  chunkFrames: number;
  /** S: the first S committed frames stay attendable for the whole rollout (attention sink). */
  sinkFrames: number;
  /** W: the most recent W committed non-sink frames stay attendable; older ones drop out. */
  localWindowFrames: number;
  /** Latent height and width of every chunk (multiples of the spatial patch). */
  height: number;
  width: number;
  /** Rows of the text states (the prompt embeddings' padded length). */
  textLen: number;
}


/** Latents or text states as a native tensor of the right size (bound directly) or host floats (copied into staging). */
export type TensorInput = NativeTensor | Float32Array;

/**
 * Block-causal Wan DiT with a chunk KV cache, for chunked autoregressive video generation (CausVid, Yin et al. 2025,
 * "From Slow Bidirectional to Fast Autoregressive Video Diffusion Models"; Self-Forcing, Huang et al. 2025). Same
 * parameters and names as `WanDiT` (diffusers `WanTransformer3DModel`, `wanDiTParams`): one checkpoint serves both.
 * Requires a temporal patch of 1 (as Wan 2.1), so a token frame is a latent frame.
 *
 * Rollout. Latent frames are grouped in chunks of C = `chunkFrames`; chunk k holds absolute frames k·C … k·C + C − 1.
 *  - `denoiseChunk(latents, timesteps, context)` runs one forward of the current chunk: latents `[1, C_in, C, h, w]`
 *    (channels-first float32, as `WanDiT`), one timestep per latent frame (σ·1000), text states `[1, Lt, textDim]`
 *    → velocity `[1, C_out, C, h, w]`. The cache is not modified, so it can be called for every sampler step.
 *  - `commitChunk(cleanLatents, context)` runs the same forward at t = 0 on the clean (denoised) chunk and appends
 *    each block's keys/values of it to the cache (CausVid / Self-Forcing compute the cached K/V of a generated
 *    chunk from the clean chunk at timestep 0, not from the last noisy step), then advances to the next chunk. Only
 *    the work K/V depend on is run: the last block stops after its K/V, the head is skipped.
 *
 * Attention pattern (self-attention of every block): a query token of chunk k attends to
 *   [sink frames 0 … S−1] ∪ [the last W committed non-sink frames, max(S, k·C − W) … k·C − 1] ∪ [all of chunk k]
 * i.e. full attention inside the chunk, causal across chunks, with a sliding window and S pinned sink frames. Keys
 * carry RoPE of their ABSOLUTE frame index (rotated once, when computed, and cached rotated). Cross-attention to the
 * text is unchanged. Equivalent to a full-sequence forward over [committed chunks at t = 0, current chunk] with a
 * block-causal + sink + window mask (tools/reference/causal_reference.py checks both formulations agree).
 *
 * Per-frame timesteps: the sinusoidal time embedding, the 6-way block modulation (shift/scale/gate for attention and
 * FFN) and the head's shift/scale are computed per latent frame and applied to that frame's tokens (`modulate` /
 * `gated_add` with groups = C).
 *
 * Per-frame actions (models with `config.action`): `denoiseChunk(…, actions)` / `commitChunk(…, actions)` take one
 * action per chunk frame (`ChunkActions`: C key ids, optional vectors `[C, vectorDim]`); frame f's action embedding
 * is added to its time embedding before `time_proj` (see `recordConditionEmbeddings`), so it reaches every block's
 * modulation and the head. Omitted actions are key 0 ("none") with zero vectors; `commitChunk` defaults to the
 * actions of the last `denoiseChunk`, so the committed K/V see the action the chunk was generated with.
 *
 * Execution: the whole forward of a chunk is one plan run (one native call). Each block writes the chunk's rotated
 * keys and values straight into the cache's scratch frame slots (plan ops writing into the bound cache buffers) and
 * attends over the contiguous slot prefix [0, n + C) of cached frames plus the chunk (see `KVCache`), so a plan is
 * compiled per number n of cached frames (≤ ⌈(S + W)/C⌉ + 1 values, on first use) and per kind: `denoise` (ends
 * with the velocity) and `commit` (stops after the last block's K/V, no head). A commit then moves the scratch K/V
 * into their sink/ring slots. The text's cross-attention keys/values of every block depend on the prompt only: a
 * small separate plan computes them when a call passes a different `context` object than the previous call (pass a new
 * tensor for a new prompt; mutating the previous one in place is not noticed). Calls are serialized: a call issued
 * while another runs waits for it.
 */
export class CausalWanDiT {
  readonly cache: KVCache;
  readonly rollout: Readonly<CausalRolloutConfig>;
  /** Plans by `${cached frames}|${kind}` (see the class docs). */
  private readonly plans = new Map<string, CompiledPlan>();
  private readonly owned: NativeTensor[] = [];
  private readonly st: {
    latents: NativeTensor;
    timestep: NativeTensor;
    context: NativeTensor;
    cos: NativeTensor;
    sin: NativeTensor;
    velocity: NativeTensor;
    actionKeys?: NativeTensor;
    actionVectors?: NativeTensor;
  };
  /** Cross-attention keys and values of every block for the text states of `textFor`: `[1, Lt, dim]` each. */
  private readonly textKV: Array<{ k: NativeTensor; v: NativeTensor }> = [];
  private textPlan?: CompiledPlan;
  /** The context the text K/V were computed from (recomputed when a call passes another object). */
  private textFor?: TensorInput;
  private ropeFrameStart = -1;
  private queue: Promise<unknown> = Promise.resolve();
  private lastContext?: TensorInput;
  private lastActions?: ChunkActions;
  private disposed = false;

  constructor(
    private readonly native: NativeBinding,
    readonly config: WanDiTConfig,
    private readonly weights: WeightStore,
    rollout: CausalRolloutConfig,
    /** Operand dtype of the matrix products (see `WanDiT.matmulDtype`). */
    readonly matmulDtype: MatmulDtype = 'float32',
  ) {
    const [pt, ph, pw] = config.patchSize;
    const r = { ...rollout };
    const bad = (msg: string): never => {
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `CausalWanDiT: ${msg}`);
    };
    if (pt !== 1) bad(`the temporal patch must be 1 (per-frame timesteps), got ${pt}`);
    for (const [name, v, min] of [
      ['chunkFrames', r.chunkFrames, 1],
      ['sinkFrames', r.sinkFrames, 0],
      ['localWindowFrames', r.localWindowFrames, 0],
      ['height', r.height, 1],
      ['width', r.width, 1],
      ['textLen', r.textLen, 1],
    ] as const) {
      if (!Number.isSafeInteger(v) || v < min) bad(`${name} must be an integer ≥ ${min}, got ${v}`);
    }
    if (r.height % ph !== 0 || r.width % pw !== 0) bad(`latent ${r.height}×${r.width} is not a multiple of the patch ${ph}×${pw}`);
    this.rollout = Object.freeze(r);
    const d = config.dim;
    const Lc = this.chunkTokens;
    const tensor = (shape: number[]): NativeTensor => {
      const t = createTensor(native, shape);
      this.owned.push(t);
      return t;
    };
    try {
      this.cache = new KVCache(native, {
        layers: config.numLayers,
        dim: d,
        tokensPerFrame: this.tokensPerFrame,
        chunkFrames: r.chunkFrames,
        sinkFrames: r.sinkFrames,
        windowFrames: r.localWindowFrames,
      });
      const half = d / config.numHeads / 2;
      this.st = {
        latents: tensor(this.chunkShape),
        timestep: tensor([r.chunkFrames, config.freqDim]),
        context: tensor([1, r.textLen, config.textDim]),
        cos: tensor([Lc, half]),
        sin: tensor([Lc, half]),
        velocity: tensor([1, config.outChannels, r.chunkFrames, r.height, r.width]),
        actionKeys: config.action === undefined ? undefined : tensor([r.chunkFrames]),
        actionVectors: config.action !== undefined && config.action.vectorDim > 0 ? tensor([r.chunkFrames, config.action.vectorDim]) : undefined,
      };
      for (let i = 0; i < config.numLayers; i++) this.textKV.push({ k: tensor([1, r.textLen, d]), v: tensor([1, r.textLen, d]) });
      this.textPlan = this.buildTextPlan();
      // The plan of the first chunk now, so a shape the kernels reject fails here rather than mid-rollout.
      this.plan(0, 'denoise');
    } catch (e) {
      this.dispose();
      throw e;
    }
  }

  /** Tokens per latent frame: (h/ph)·(w/pw). */
  get tokensPerFrame(): number {
    return (this.rollout.height / this.config.patchSize[1]) * (this.rollout.width / this.config.patchSize[2]);
  }

  /** Tokens per chunk: C · tokensPerFrame. */
  get chunkTokens(): number {
    return this.rollout.chunkFrames * this.tokensPerFrame;
  }

  /** Latent shape of one chunk: `[1, C_in, C, h, w]`. */
  get chunkShape(): number[] {
    return [1, this.config.inChannels, this.rollout.chunkFrames, this.rollout.height, this.rollout.width];
  }

  /** Chunks committed so far (= index of the chunk `denoiseChunk` works on). */
  get chunkIndex(): number {
    return this.cache.committedFrames / this.rollout.chunkFrames;
  }

  /** Absolute latent frame index of the current chunk's first frame. */
  get frameStart(): number {
    return this.cache.committedFrames;
  }

  /** Native bytes held by this rollout: KV cache, staging tensors, plan arenas (weights are the store's). */
  get bytes(): number {
    let n = this.cache.bytes;
    for (const t of this.owned) n += t.disposed ? 0 : t.numel * 4;
    for (const p of this.plans.values()) n += p.arenaBytes;
    return n + (this.textPlan?.arenaBytes ?? 0);
  }

  /** The plan for a chunk attending to `cached` committed frames, compiled on first use. */
  private plan(cached: number, kind: 'denoise' | 'commit'): CompiledPlan {
    const key = `${cached}|${kind}`;
    let p = this.plans.get(key);
    if (p === undefined) {
      p = this.build(cached, kind);
      this.plans.set(key, p);
    }
    return p;
  }

  private build(cached: number, kind: 'denoise' | 'commit'): CompiledPlan {
    const c = this.config;
    const r = this.rollout;
    const [, ph, pw] = c.patchSize;
    const d = c.dim;
    const D = d / c.numHeads;
    const C = r.chunkFrames;
    const Hp = r.height / ph;
    const Wp = r.width / pw;
    const L = this.chunkTokens;
    const tpf = this.tokensPerFrame;
    const patchFeat = c.inChannels * ph * pw;

    const g = new PlanBuilder();
    const ops = ditPlanOps(g, this.weights, this.matmulDtype);
    const { w } = ops;

    const latents = g.input('latents', this.chunkShape);
    const tfreq = g.input('timestep', [C, c.freqDim]);
    const cos = g.input('rope_cos', [L, D / 2]);
    const sin = g.input('rope_sin', [L, D / 2]);
    const a = c.action;
    const action = a && { keys: g.input('action_keys', [C]), vectors: a.vectorDim > 0 ? g.input('action_vectors', [C, a.vectorDim]) : undefined, framesPerTimestep: 1 };
    const capacity = [this.cache.capacityFrames, tpf, d];
    const kCache = Array.from({ length: c.numLayers }, (_, i) => g.input(`k_cache.${i}`, capacity));
    const vCache = Array.from({ length: c.numLayers }, (_, i) => g.input(`v_cache.${i}`, capacity));

    // Patch embedding (Conv3d, kernel = stride = patch) as patchify + Linear; tokens in (f, h, w) order.
    const patches = g.permute(latents, [c.inChannels, C, Hp, ph, Wp, pw], [1, 2, 4, 0, 3, 5], 'patchify');
    let x = g.linear(g.reshape(patches, [1, L, patchFeat]), w('patch_embedding.weight', [d, patchFeat]), w('patch_embedding.bias', [d]), { matmulDtype: ops.matmulDtype, label: 'patch_embedding' });
    // Per-frame time embedding (+ the frame's action embedding): temb [C, d], 6-way projection [C, 6·d].
    const { temb, tproj } = recordTimeEmbeddings(ops, c, tfreq, action);
    // The text's cross-attention K/V come precomputed (`buildTextPlan`): they are the same for every chunk and step.
    const crossKV = Array.from({ length: c.numLayers }, (_, i) => ({ k: g.input(`text_k.${i}`, [1, r.textLen, d]), v: g.input(`text_v.${i}`, [1, r.textLen, d]) }));

    const rope = { batch: 1, heads: c.numHeads, headDim: D };
    // groups = C: frame f's tokens take modulation row f (e [1, C, 6, d]) + the block's scale_shift_table.
    const cond = { tproj, crossKV, batch: 1, groups: C };
    const scratch = cached * tpf * d;
    /** Rotated keys and values of block i into its cache's scratch frames [cached, cached + C); returns the rotated queries. */
    const writeKV = (i: number, n1: Value, q: Value, k: Value): Value => {
      const b = `blocks.${i}`;
      g.writeInto(g.slice(kCache[i], scratch, [1, L, d]), g.rope(k, cos, sin, { ...rope, label: `${b}.attn1.rope_k` }), `${b}.attn1.k_to_cache`);
      g.writeInto(g.slice(vCache[i], scratch, [1, L, d]), ops.lin(n1, `${b}.attn1.to_v`, d, d), `${b}.attn1.v_to_cache`);
      return g.rope(q, cos, sin, { ...rope, label: `${b}.attn1.rope_q` });
    };
    const keys = [1, (cached + C) * tpf, d];
    const last = c.numLayers - 1;
    for (let i = 0; i < c.numLayers; i++) {
      if (kind === 'commit' && i === last) {
        // Nothing reads the last block's output when committing: record only what its K/V need.
        const { n1, q, k } = recordDiTSelfAttentionInputs(ops, c, i, x, cond);
        writeKV(i, n1, q, k);
        break;
      }
      x = recordDiTBlock(ops, c, i, x, cond, (n1, q, k) =>
        g.attention(writeKV(i, n1, q, k), g.slice(kCache[i], 0, keys), g.slice(vCache[i], 0, keys), { ...rope, scale: 1 / Math.sqrt(D), matmulDtype: ops.matmulDtype, label: `blocks.${i}.attn1[${cached}+${C} frames]` }),
      );
    }
    if (kind === 'denoise') {
      // Head: shift, scale = scale_shift_table [2, d] + temb of the token's frame (e [1, C, 1, d]).
      const out = recordDiTHead(ops, c, x, temb, { batch: 1, groups: C }, ph * pw * c.outChannels);
      // Unpatchify: [(f, h, w), (ph, pw, c)] → [1, C_out, C, H, W].
      g.output('velocity', g.permute(out, [C, Hp, Wp, ph, pw, c.outChannels], [5, 0, 1, 3, 2, 4], 'unpatchify'));
    }
    return g.compile(this.native);
  }

  /** The plan from the text states `context` `[1, Lt, textDim]` to every block's cross-attention K/V (`text_k.i`, `text_v.i`). */
  private buildTextPlan(): CompiledPlan {
    const c = this.config;
    const g = new PlanBuilder();
    const ops = ditPlanOps(g, this.weights, this.matmulDtype);
    const ctx = recordTextEmbedding(ops, c, g.input('context', [1, this.rollout.textLen, c.textDim]));
    for (let i = 0; i < c.numLayers; i++) {
      const { k, v } = recordCrossAttentionKV(ops, c, i, ctx);
      g.output(`text_k.${i}`, k);
      g.output(`text_v.${i}`, v);
    }
    return g.compile(this.native);
  }

  /** Computes the blocks' cross-attention K/V for `context` unless the last call used the same object. */
  private async prepareText(context: TensorInput): Promise<void> {
    if (context === this.textFor) return;
    const bind: Record<string, NativeTensor> = { context: this.input(context, this.st.context, 'context') };
    this.textKV.forEach(({ k, v }, i) => {
      bind[`text_k.${i}`] = k;
      bind[`text_v.${i}`] = v;
    });
    this.textFor = undefined;
    await this.textPlan!.run(bind);
    this.textFor = context;
  }

  /**
   * One forward of the current chunk (absolute frames `frameStart` …): writes the velocity `[1, C_out, C, h, w]`
   * into `out` when given and returns it as a Float32Array (a copy when `out` is omitted). `timesteps[f]` is frame
   * f's σ·1000; `actions` frame f's action (model with an action module only; omitted → all "none"). The cache is
   * left unchanged.
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE for a wrong number of timesteps, wrongly sized inputs, or invalid
   *   actions (see `writeChunkActions`: wrong length, non-integer or out-of-range key, non-finite vector, or actions
   *   for a model without an action module; the message names the frame).
   */
  denoiseChunk(latents: TensorInput, timesteps: readonly number[], context: TensorInput, out?: NativeTensor, actions?: ChunkActions): Promise<Float32Array> {
    return this.serial(async () => {
      this.checkTimesteps(timesteps);
      const bind = this.bindings(latents, timesteps, out, actions, 'CausalWanDiT.denoiseChunk');
      await this.prepareText(context);
      this.lastContext = context;
      this.lastActions = actions && { keys: [...actions.keys], vectors: actions.vectors?.slice() }; // the caller may reuse its buffers
      await this.plan(this.cache.validFrames, 'denoise').run(bind);
      return out === undefined ? this.st.velocity.data.slice() : out.data;
    });
  }

  /**
   * Commits the clean chunk `[1, C_in, C, h, w]`: runs it at t = 0 (same attention pattern as `denoiseChunk`) and
   * appends every block's K/V of it to the cache; frames leaving the window drop out, the sink stays. `context` and
   * `actions` default to those of the last `denoiseChunk` call.
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE without a context to use, or for invalid inputs (as `denoiseChunk`).
   */
  commitChunk(cleanLatents: TensorInput, context?: TensorInput, actions?: ChunkActions): Promise<void> {
    return this.serial(async () => {
      const ctx = context ?? this.lastContext;
      if (ctx === undefined) throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', 'CausalWanDiT.commitChunk: no context given and no denoiseChunk call to take it from');
      const zeros = new Array<number>(this.rollout.chunkFrames).fill(0);
      const bind = this.bindings(cleanLatents, zeros, undefined, actions ?? this.lastActions, 'CausalWanDiT.commitChunk');
      await this.prepareText(ctx);
      await this.plan(this.cache.validFrames, 'commit').run(bind);
      this.cache.commitScratch();
    });
  }

  /** Starts a new rollout (frame 0, empty cache); plans and buffers are kept. */
  reset(): void {
    this.cache.reset();
    this.lastContext = undefined;
    this.lastActions = undefined;
  }

  /** Frees the cache, staging tensors and plans (weights belong to the WeightStore). Idempotent. */
  dispose(): void {
    this.disposed = true;
    this.cache?.dispose();
    for (const t of this.owned) t.dispose();
    this.owned.length = 0;
    for (const p of this.plans.values()) p.dispose();
    this.plans.clear();
    this.textPlan?.dispose();
    this.textFor = undefined;
    this.lastContext = undefined;
    this.lastActions = undefined;
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(() => {
      if (this.disposed) throw new OmniError('OMNIRX_ERR_NATIVE', 'CausalWanDiT: used after dispose()');
      return fn();
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  private checkTimesteps(t: readonly number[]): void {
    if (t.length !== this.rollout.chunkFrames || !t.every((x) => Number.isFinite(x))) {
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `CausalWanDiT.denoiseChunk: need ${this.rollout.chunkFrames} finite per-frame timesteps, got [${t.join(', ')}]`);
    }
  }

  /**
   * Fills the per-call inputs (actions, latents, per-frame timestep features, RoPE at the absolute frame) and the
   * slot map; actions are validated first, so an invalid call changes nothing.
   */
  private bindings(latents: TensorInput, timesteps: readonly number[], out: NativeTensor | undefined, actions: ChunkActions | undefined, who: string): Record<string, NativeTensor> {
    const c = this.config;
    const r = this.rollout;
    const st = this.st;
    writeChunkActions(c.action, r.chunkFrames, actions, { keys: st.actionKeys?.data, vectors: st.actionVectors?.data }, who);
    const lat = this.input(latents, st.latents, 'latents');
    if (out !== undefined && out.numel !== st.velocity.numel) throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `CausalWanDiT: out has ${out.numel} elements, expected ${st.velocity.numel}`);
    timesteps.forEach((t, f) => st.timestep.data.set(timestepEmbedding(t, c.freqDim), f * c.freqDim));
    if (this.ropeFrameStart !== this.frameStart) {
      const [, ph, pw] = c.patchSize;
      const tables = wanRopeTables(r.chunkFrames, r.height / ph, r.width / pw, c.dim / c.numHeads, c.ropeTheta, this.frameStart);
      st.cos.data.set(tables.cos);
      st.sin.data.set(tables.sin);
      this.ropeFrameStart = this.frameStart;
    }
    const bind: Record<string, NativeTensor> = { latents: lat, timestep: st.timestep, rope_cos: st.cos, rope_sin: st.sin, velocity: out ?? st.velocity };
    if (st.actionKeys !== undefined) bind.action_keys = st.actionKeys;
    if (st.actionVectors !== undefined) bind.action_vectors = st.actionVectors;
    for (let i = 0; i < c.numLayers; i++) {
      bind[`k_cache.${i}`] = this.cache.k(i);
      bind[`v_cache.${i}`] = this.cache.v(i);
      bind[`text_k.${i}`] = this.textKV[i].k;
      bind[`text_v.${i}`] = this.textKV[i].v;
    }
    return bind;
  }

  private input(x: TensorInput, staging: NativeTensor, what: string): NativeTensor {
    const n = x instanceof Float32Array ? x.length : x.numel;
    if (n !== staging.numel) throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `CausalWanDiT: ${what} has ${n} elements, expected ${staging.numel} [${staging.shape.join(', ')}]`);
    if (x instanceof Float32Array) {
      staging.data.set(x);
      return staging;
    }
    return x;
  }
}
