import type { NativeBinding, NativeTensor } from '../../native/binding';
import { createTensor } from '../../native/binding';
import { CompiledPlan, PlanBuilder, type Value } from '../../native/plan-builder';
import type { ParamSpec, WeightStore } from '../weights/weight-store';
import type { WanDiTConfig } from './config';
import { timestepEmbedding, wanRopeTables } from './rope';

/** Latent grid of one forward: channels-first latents `[1, C, F, H, W]` and the text length. */
export interface DiTShape {
  frames: number;
  height: number;
  width: number;
  textLen: number;
}

/** Parameter names (diffusers `WanTransformer3DModel`) and shapes. */
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
  return p;
}

/**
 * The Wan DiT forward as a native plan: latents `[1, C, F, H, W]`, a timestep and text hidden states
 * `[1, Lt, textDim]` → flow velocity `[1, C_out, F, H, W]` (float32). Structure follows diffusers
 * `WanTransformer3DModel` / `WanTransformerBlock`: patch embedding (Conv3d with kernel = stride = patch), time
 * embedding → 6-way adaLN modulation per block (shift, scale, gate for self-attention and FFN), self-attention
 * with q/k RMSNorm across heads and 3D RoPE, text cross-attention after an affine LayerNorm, GELU-tanh FFN,
 * modulated output head and unpatchify. One plan per shape bucket, compiled on first use and cached.
 */
export class WanDiT {
  private readonly plans = new Map<string, { plan: CompiledPlan; cos: NativeTensor; sin: NativeTensor }>();

  constructor(
    private readonly native: NativeBinding,
    readonly config: WanDiTConfig,
    private readonly weights: WeightStore,
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
    const w = (name: string, shape: number[]): Value => g.constant(this.weights.get(name, shape));
    const lin = (x: Value, name: string, out: number, inp: number, act?: 'gelu_tanh' | 'silu') =>
      g.linear(x, w(`${name}.weight`, [out, inp]), w(`${name}.bias`, [out]), { act, label: name });

    const latents = g.input('latents', [1, c.inChannels, s.frames, s.height, s.width]);
    const tfreq = g.input('timestep', [1, c.freqDim]);
    const context = g.input('context', [1, s.textLen, c.textDim]);
    const cos = g.constant(cosT);
    const sin = g.constant(sinT);

    // Patch embedding: [C, F, H, W] → tokens [(f, h, w), (c, kt, kh, kw)] → Linear (= Conv3d, kernel = stride).
    const patches = g.permute(latents, [c.inChannels, Fp, pt, Hp, ph, Wp, pw], [1, 3, 5, 0, 2, 4, 6], 'patchify');
    let x = g.linear(g.reshape(patches, [L, patchFeat]), w('patch_embedding.weight', [d, patchFeat]), w('patch_embedding.bias', [d]), { label: 'patch_embedding' });

    const temb = lin(lin(tfreq, 'condition_embedder.time_embedder.linear_1', d, c.freqDim, 'silu'), 'condition_embedder.time_embedder.linear_2', d, d);
    const tproj = lin(g.silu(temb), 'condition_embedder.time_proj', 6 * d, d);
    const ctx = lin(lin(context, 'condition_embedder.text_embedder.linear_1', d, c.textDim, 'gelu_tanh'), 'condition_embedder.text_embedder.linear_2', d, d);

    const attn = { batch: 1, heads: c.numHeads, headDim: D, scale: 1 / Math.sqrt(D) };
    const mod = { batch: 1, groups: 1, chunks: 6 };
    for (let i = 0; i < c.numLayers; i++) {
      const b = `blocks.${i}`;
      g.segment(b);
      const e = g.add(tproj, w(`${b}.scale_shift_table`, [1, 6, d]), `${b}.modulation`);
      // Self-attention.
      const n1 = g.modulate(g.layerNorm(x, c.eps, undefined, undefined, `${b}.norm1`), e, { ...mod, shift: 0, scale: 1, label: `${b}.norm1.modulate` });
      const q = g.rmsNorm(lin(n1, `${b}.attn1.to_q`, d, d), c.eps, w(`${b}.attn1.norm_q.weight`, [d]), { label: `${b}.attn1.norm_q` });
      const k = g.rmsNorm(lin(n1, `${b}.attn1.to_k`, d, d), c.eps, w(`${b}.attn1.norm_k.weight`, [d]), { label: `${b}.attn1.norm_k` });
      const v = lin(n1, `${b}.attn1.to_v`, d, d);
      const qr = g.rope(q, cos, sin, { batch: 1, heads: c.numHeads, headDim: D, label: `${b}.attn1.rope_q` });
      const kr = g.rope(k, cos, sin, { batch: 1, heads: c.numHeads, headDim: D, label: `${b}.attn1.rope_k` });
      const a1 = lin(g.attention(qr, kr, v, { ...attn, label: `${b}.attn1` }), `${b}.attn1.to_out.0`, d, d);
      x = g.gatedAdd(x, a1, { e, ...mod, index: 2 }, `${b}.attn1.gate`);
      // Cross-attention to the text.
      const n2 = g.layerNorm(x, c.eps, w(`${b}.norm2.weight`, [d]), w(`${b}.norm2.bias`, [d]), `${b}.norm2`);
      const q2 = g.rmsNorm(lin(n2, `${b}.attn2.to_q`, d, d), c.eps, w(`${b}.attn2.norm_q.weight`, [d]), { label: `${b}.attn2.norm_q` });
      const k2 = g.rmsNorm(lin(ctx, `${b}.attn2.to_k`, d, d), c.eps, w(`${b}.attn2.norm_k.weight`, [d]), { label: `${b}.attn2.norm_k` });
      const v2 = lin(ctx, `${b}.attn2.to_v`, d, d);
      const a2 = lin(g.attention(q2, k2, v2, { ...attn, label: `${b}.attn2` }), `${b}.attn2.to_out.0`, d, d);
      x = g.gatedAdd(x, a2, undefined, `${b}.attn2.residual`);
      // Feed-forward.
      const n3 = g.modulate(g.layerNorm(x, c.eps, undefined, undefined, `${b}.norm3`), e, { ...mod, shift: 3, scale: 4, label: `${b}.norm3.modulate` });
      const ff = lin(lin(n3, `${b}.ffn.net.0.proj`, c.ffnDim, d, 'gelu_tanh'), `${b}.ffn.net.2`, d, c.ffnDim);
      x = g.gatedAdd(x, ff, { e, ...mod, index: 5 }, `${b}.ffn.gate`);
    }
    g.segment('head');
    const eh = g.add(w('scale_shift_table', [1, 2, d]), temb, 'head.modulation');
    const nh = g.modulate(g.layerNorm(x, c.eps, undefined, undefined, 'norm_out'), eh, { batch: 1, groups: 1, chunks: 2, shift: 0, scale: 1, label: 'norm_out.modulate' });
    const out = lin(nh, 'proj_out', pt * ph * pw * c.outChannels, d);
    // Unpatchify: [(f, h, w), (pt, ph, pw, c)] → [C, F, H, W].
    const video = g.permute(out, [Fp, Hp, Wp, pt, ph, pw, c.outChannels], [6, 0, 3, 1, 4, 2, 5], 'unpatchify');
    g.output('velocity', video);
    return { plan: g.compile(this.native), cos: cosT, sin: sinT };
  }

  /** The compiled plan for a shape bucket (compiled on first use). */
  planFor(s: DiTShape): CompiledPlan {
    const key = `${s.frames}x${s.height}x${s.width}:${s.textLen}`;
    let entry = this.plans.get(key);
    if (entry === undefined) {
      entry = this.build(s);
      this.plans.set(key, entry);
    }
    return entry.plan;
  }

  /**
   * One forward: writes the velocity for `latents` at timestep `t` (σ·1000) into `out`.
   * `timestep` is a caller-owned `[1, freqDim]` scratch tensor the embedding is written into.
   */
  async forward(s: DiTShape, io: { latents: NativeTensor; context: NativeTensor; timestep: NativeTensor; out: NativeTensor }, t: number): Promise<void> {
    io.timestep.data.set(timestepEmbedding(t, this.config.freqDim));
    await this.planFor(s).run({ latents: io.latents, timestep: io.timestep, context: io.context, velocity: io.out });
  }

  dispose(): void {
    for (const e of this.plans.values()) {
      e.plan.dispose();
      e.cos.dispose();
      e.sin.dispose();
    }
    this.plans.clear();
  }
}
