import type { PlanBuilder, Value, MatmulDtype } from '../../native/plan-builder';
import type { WeightStore } from '../weights/weight-store';
import type { WanDiTConfig } from './config';

/**
 * Plan fragments shared by `WanDiT` and `CausalWanDiT` (diffusers `WanTransformer3DModel` / `WanTransformerBlock`
 * naming, see `wanDiTParams`). Tokens are `[B, L, dim]` float32 rows; only the parts that are the same computation in
 * both models live here (the self-attention itself, patchify/unpatchify and segmenting stay with each model).
 */

/** Records a linear layer `{name}.weight` `[out, inp]` + `{name}.bias` `[out]` (optional fused activation). */
export type DiTLinear = (x: Value, name: string, out: number, inp: number, act?: 'gelu_tanh' | 'silu') => Value;

/** A plan builder with the DiT's weight lookup (`w`: name and shape → plan constant) and linear layer (`lin`). */
export interface DiTPlanOps {
  g: PlanBuilder;
  w: (name: string, shape: number[]) => Value;
  lin: DiTLinear;
  /** Operand dtype of every matrix product the DiT records (linears and attention). */
  matmulDtype: MatmulDtype;
}

/**
 * Wraps `g` with weight lookups from `weights` (shapes are checked by the store). Every linear (and, through
 * `matmulDtype`, every attention) runs its products in `matmulDtype` ('bfloat16': bf16 operands, float32
 * accumulation; see `PlanBuilder.linear`).
 */
export function ditPlanOps(g: PlanBuilder, weights: WeightStore, matmulDtype: MatmulDtype = 'float32'): DiTPlanOps {
  const w = (name: string, shape: number[]): Value => g.constant(weights.get(name, shape));
  const lin: DiTLinear = (x, name, out, inp, act) => g.linear(x, w(`${name}.weight`, [out, inp]), w(`${name}.bias`, [out]), { act, matmulDtype, label: name });
  return { g, w, lin, matmulDtype };
}

/** Outputs of `recordConditionEmbeddings`. */
export interface DiTConditions {
  /**
   * Time embedding `[rows, dim]` (one row per timestep: per sample in `WanDiT`, per latent frame in `CausalWanDiT`;
   * per (sample, latent frame) in `WanDiT` when actions are given), action embedding included.
   */
  temb: Value;
  /** 6-way modulation projection `[rows, 6·dim]` of silu(temb). */
  tproj: Value;
  /** Projected text states `[B, Lt, dim]`. */
  ctx: Value;
}

/** Plan inputs of the action module (`WanDiTConfig.action`), one action per latent frame. */
export interface DiTActionInputs {
  /** Key ids `[B·F]` (float32 integers in [0, numKeys)), frame-minor: row b·F + f is frame f of sample b. */
  keys: Value;
  /** Continuous action vectors `[B·F, vectorDim]` float32; required when vectorDim > 0. */
  vectors?: Value;
  /** F: latent frames per timestep row of `tfreq` (1 when every frame has its own timestep row). */
  framesPerTimestep: number;
}

/**
 * Records the action embedding `[B·F, dim]`: a_f = key_embedding[key_f] + vector_proj(v_f), with
 * `condition_embedder.action_embedder.key_embedding.weight` `[numKeys, dim]` (nn.Embedding layout) and, when
 * vectorDim > 0, `condition_embedder.action_embedder.vector_proj.{weight [dim, vectorDim], bias [dim]}`.
 */
export function recordActionEmbedding(ops: DiTPlanOps, c: WanDiTConfig, action: DiTActionInputs): Value {
  const { g, w, lin } = ops;
  const cfg = c.action;
  if (cfg === undefined) throw new Error('recordActionEmbedding: the model has no action module');
  const name = 'condition_embedder.action_embedder';
  const a = g.embedding(action.keys, w(`${name}.key_embedding.weight`, [cfg.numKeys, c.dim]), `${name}.key_embedding`);
  if (cfg.vectorDim === 0) return a;
  if (action.vectors === undefined) throw new Error('recordActionEmbedding: the model takes action vectors but none were recorded');
  return g.add(a, lin(action.vectors, `${name}.vector_proj`, c.dim, cfg.vectorDim), `${name}.sum`);
}

/**
 * Records the condition embedder: sinusoidal timestep features `tfreq` `[rows, freqDim]` → time embedding (Linear,
 * SiLU, Linear) and its 6·dim projection; text states `context` `[B, Lt, textDim]` → `[B, Lt, dim]` (Linear,
 * GELU-tanh, Linear). With `action` (models with an action module), the action embedding of each latent frame is
 * added to the time embedding of that frame BEFORE the 6·dim projection (adaLN action conditioning): temb row r of
 * `tfreq` is repeated for its `framesPerTimestep` frames, so `temb`/`tproj` get one row per (sample, frame).
 */
export function recordConditionEmbeddings(ops: DiTPlanOps, c: WanDiTConfig, tfreq: Value, context: Value, action?: DiTActionInputs): DiTConditions {
  return { ...recordTimeEmbeddings(ops, c, tfreq, action), ctx: recordTextEmbedding(ops, c, context) };
}

/** The time part of `recordConditionEmbeddings`: `temb` and `tproj` (with the action embedding when given). */
export function recordTimeEmbeddings(ops: DiTPlanOps, c: WanDiTConfig, tfreq: Value, action?: DiTActionInputs): { temb: Value; tproj: Value } {
  const { g, lin } = ops;
  const d = c.dim;
  let temb = lin(lin(tfreq, 'condition_embedder.time_embedder.linear_1', d, c.freqDim, 'silu'), 'condition_embedder.time_embedder.linear_2', d, d);
  if (action !== undefined) {
    const a = recordActionEmbedding(ops, c, action);
    const F = action.framesPerTimestep;
    if (F === 1) {
      temb = g.add(temb, a, 'condition_embedder.action_add');
    } else {
      // temb [B, d] repeated per frame: view a as [B, F, d], permute to [F, B, d] so `add` tiles temb over F, back.
      const B = tfreq.shape[0];
      const fb = g.add(g.permute(a, [B, F, d], [1, 0, 2], 'action.frame_major'), temb, 'condition_embedder.action_add');
      temb = g.reshape(g.permute(fb, [F, B, d], [1, 0, 2], 'action.sample_major'), [B * F, d]);
    }
  }
  const tproj = lin(g.silu(temb), 'condition_embedder.time_proj', 6 * d, d);
  return { temb, tproj };
}

/** The text part of `recordConditionEmbeddings`: `context` `[B, Lt, textDim]` → `[B, Lt, dim]` (Linear, GELU-tanh, Linear). */
export function recordTextEmbedding(ops: DiTPlanOps, c: WanDiTConfig, context: Value): Value {
  const { lin } = ops;
  return lin(lin(context, 'condition_embedder.text_embedder.linear_1', c.dim, c.textDim, 'gelu_tanh'), 'condition_embedder.text_embedder.linear_2', c.dim, c.dim);
}

/**
 * Keys (RMS-normed) and values `[B, Lt, dim]` of block `index`'s cross-attention over the projected text `ctx`. They
 * depend on the text only, so a caller that runs many forwards with one prompt can compute them once.
 */
export function recordCrossAttentionKV(ops: DiTPlanOps, c: WanDiTConfig, index: number, ctx: Value): { k: Value; v: Value } {
  const { g, w, lin } = ops;
  const d = c.dim;
  const b = `blocks.${index}`;
  const k = g.rmsNorm(lin(ctx, `${b}.attn2.to_k`, d, d), c.eps, w(`${b}.attn2.norm_k.weight`, [d]), { label: `${b}.attn2.norm_k` });
  return { k, v: lin(ctx, `${b}.attn2.to_v`, d, d) };
}

/**
 * Self-attention of one block, recorded by the model: given the modulated norm1 output `n1` `[B, L, dim]` and the
 * RMS-normed (not yet rotated) queries `q` and keys `k` `[B, L, dim]`, records the values (`{block}.attn1.to_v`), RoPE
 * and the attention however the model does it, and returns the attention output `[B, L, dim]` before `to_out.0`.
 */
export type DiTSelfAttention = (n1: Value, q: Value, k: Value) => Value;

/**
 * Records transformer block `index` (`blocks.{index}`) on tokens `x` `[batch, L, dim]` and returns the new tokens:
 * adaLN-modulated self-attention (q/k RMSNorm, attention by `selfAttention`) with a gated residual, affine-LayerNorm
 * cross-attention to `cond.ctx` with a plain residual, and a modulated GELU-tanh FFN with a gated residual
 * (diffusers `WanTransformerBlock`). Modulation rows come from `cond.tproj` + the block's `scale_shift_table`
 * (shift, scale, gate × 2); with `groups` > 1 the L tokens split into `groups` equal runs, run j taking row j.
 */
/**
 * Conditioning of a block: the 6·dim modulation rows, the text (the projected text states `ctx`, or the block's
 * precomputed cross-attention keys/values `crossKV[index]` from `recordCrossAttentionKV`), and how rows map to tokens.
 */
export interface DiTBlockConditions {
  tproj: Value;
  ctx?: Value;
  crossKV?: ReadonlyArray<{ k: Value; v: Value }>;
  batch: number;
  groups: number;
}

function modulation(ops: DiTPlanOps, c: WanDiTConfig, index: number, cond: DiTBlockConditions) {
  return { batch: cond.batch, groups: cond.groups, chunks: 6, table: ops.w(`blocks.${index}.scale_shift_table`, [1, 6, c.dim]) };
}

/**
 * Records the inputs of block `index`'s self-attention on tokens `x` `[batch, L, dim]`: the adaLN-modulated norm1
 * output `n1` and the RMS-normed (not yet rotated) queries `q` and keys `k`, all `[batch, L, dim]`. The first part of
 * `recordDiTBlock`; a block-causal commit records only this (plus values and RoPE) for its last block, whose output
 * nothing reads.
 */
export function recordDiTSelfAttentionInputs(ops: DiTPlanOps, c: WanDiTConfig, index: number, x: Value, cond: DiTBlockConditions): { n1: Value; q: Value; k: Value } {
  const { g, w, lin } = ops;
  const d = c.dim;
  const b = `blocks.${index}`;
  const mod = modulation(ops, c, index, cond);
  const n1 = g.modulate(g.layerNorm(x, c.eps, undefined, undefined, `${b}.norm1`), cond.tproj, { ...mod, shift: 0, scale: 1, label: `${b}.norm1.modulate` });
  const q = g.rmsNorm(lin(n1, `${b}.attn1.to_q`, d, d), c.eps, w(`${b}.attn1.norm_q.weight`, [d]), { label: `${b}.attn1.norm_q` });
  const k = g.rmsNorm(lin(n1, `${b}.attn1.to_k`, d, d), c.eps, w(`${b}.attn1.norm_k.weight`, [d]), { label: `${b}.attn1.norm_k` });
  return { n1, q, k };
}

export function recordDiTBlock(
  ops: DiTPlanOps,
  c: WanDiTConfig,
  index: number,
  x: Value,
  cond: DiTBlockConditions,
  selfAttention: DiTSelfAttention,
): Value {
  const { g, w, lin } = ops;
  const d = c.dim;
  const D = d / c.numHeads;
  const b = `blocks.${index}`;
  const { tproj } = cond;
  const mod = modulation(ops, c, index, cond);
  // Self-attention.
  const { n1, q, k } = recordDiTSelfAttentionInputs(ops, c, index, x, cond);
  const a1 = lin(selfAttention(n1, q, k), `${b}.attn1.to_out.0`, d, d);
  x = g.gatedAdd(x, a1, { e: tproj, ...mod, index: 2 }, `${b}.attn1.gate`);
  // Cross-attention to the text.
  const n2 = g.layerNorm(x, c.eps, w(`${b}.norm2.weight`, [d]), w(`${b}.norm2.bias`, [d]), `${b}.norm2`);
  const q2 = g.rmsNorm(lin(n2, `${b}.attn2.to_q`, d, d), c.eps, w(`${b}.attn2.norm_q.weight`, [d]), { label: `${b}.attn2.norm_q` });
  const text = cond.crossKV?.[index] ?? (cond.ctx !== undefined ? recordCrossAttentionKV(ops, c, index, cond.ctx) : undefined);
  if (text === undefined) throw new Error(`recordDiTBlock ${b}: neither ctx nor crossKV[${index}] was given`);
  const { k: k2, v: v2 } = text;
  const a2 = lin(g.attention(q2, k2, v2, { batch: cond.batch, heads: c.numHeads, headDim: D, scale: 1 / Math.sqrt(D), matmulDtype: ops.matmulDtype, label: `${b}.attn2` }), `${b}.attn2.to_out.0`, d, d);
  x = g.gatedAdd(x, a2, undefined, `${b}.attn2.residual`);
  // Feed-forward.
  const n3 = g.modulate(g.layerNorm(x, c.eps, undefined, undefined, `${b}.norm3`), tproj, { ...mod, shift: 3, scale: 4, label: `${b}.norm3.modulate` });
  const ff = lin(lin(n3, `${b}.ffn.net.0.proj`, c.ffnDim, d, 'gelu_tanh'), `${b}.ffn.net.2`, d, c.ffnDim);
  return g.gatedAdd(x, ff, { e: tproj, ...mod, index: 5 }, `${b}.ffn.gate`);
}

/**
 * Records the output head on tokens `x` `[batch, L, dim]`: LayerNorm modulated by shift, scale =
 * `scale_shift_table` `[2, dim]` + `temb` (one row per group, broadcast over both chunks), then `proj_out` →
 * `[batch, L, outFeatures]` (outFeatures = patch volume · outChannels; unpatchify is the model's).
 */
export function recordDiTHead(ops: DiTPlanOps, c: WanDiTConfig, x: Value, temb: Value, layout: { batch: number; groups: number }, outFeatures: number): Value {
  const { g, w, lin } = ops;
  const d = c.dim;
  const nh = g.modulate(g.layerNorm(x, c.eps, undefined, undefined, 'norm_out'), temb, {
    batch: layout.batch, groups: layout.groups, chunks: 2, eChunks: 1, table: w('scale_shift_table', [1, 2, d]), shift: 0, scale: 1, label: 'norm_out.modulate',
  });
  return lin(nh, 'proj_out', outFeatures, d);
}
