import type { NativeBinding, NativeTensor } from '../../native/binding';
import { createTensor } from '../../native/binding';
import { CompiledPlan, PlanBuilder } from '../../native/plan-builder';
import type { ParamSpec, WeightStore } from '../weights/weight-store';
import type { T5Config } from './config';
import type { Encoded } from './tokenizer';

/** Parameter names and shapes of a HF `T5EncoderModel` checkpoint (`shared`, `encoder.block.{i}.layer.{0,1}`). */
export function t5Params(c: T5Config): ParamSpec[] {
  const inner = c.numHeads * c.dKv;
  const p: ParamSpec[] = [{ name: 'shared.weight', shape: [c.vocabSize, c.dModel], init: 'normal', std: 1 }];
  for (let i = 0; i < c.numLayers; i++) {
    const b = `encoder.block.${i}.layer`;
    for (const n of ['q', 'k', 'v']) p.push({ name: `${b}.0.SelfAttention.${n}.weight`, shape: [inner, c.dModel], init: 'normal', std: c.dModel ** -0.5 });
    p.push({ name: `${b}.0.SelfAttention.o.weight`, shape: [c.dModel, inner], init: 'normal', std: inner ** -0.5 });
    if (i === 0) p.push({ name: `${b}.0.SelfAttention.relative_attention_bias.weight`, shape: [c.relativeAttentionNumBuckets, c.numHeads], init: 'normal', std: 0.5 });
    p.push({ name: `${b}.0.layer_norm.weight`, shape: [c.dModel], init: 'ones' });
    p.push({ name: `${b}.1.DenseReluDense.wi_0.weight`, shape: [c.dFf, c.dModel], init: 'normal', std: c.dModel ** -0.5 });
    p.push({ name: `${b}.1.DenseReluDense.wi_1.weight`, shape: [c.dFf, c.dModel], init: 'normal', std: c.dModel ** -0.5 });
    p.push({ name: `${b}.1.DenseReluDense.wo.weight`, shape: [c.dModel, c.dFf], init: 'normal', std: c.dFf ** -0.5 });
    p.push({ name: `${b}.1.layer_norm.weight`, shape: [c.dModel], init: 'ones' });
  }
  p.push({ name: 'encoder.final_layer_norm.weight', shape: [c.dModel], init: 'ones' });
  return p;
}

/**
 * T5's bidirectional relative position bucket (HF `T5Attention._relative_position_bucket`): half the buckets for
 * each sign, exact buckets below maxExact = buckets/4, logarithmic above up to `maxDistance`.
 * @param relative key position − query position
 */
export function relativePositionBucket(relative: number, numBuckets: number, maxDistance: number): number {
  const half = Math.floor(numBuckets / 2);
  let bucket = relative > 0 ? half : 0;
  const n = Math.abs(relative);
  const maxExact = Math.floor(half / 2);
  if (n < maxExact) return bucket + n;
  const large = maxExact + Math.trunc((Math.log(n / maxExact) / Math.log(maxDistance / maxExact)) * (half - maxExact));
  bucket += Math.min(large, half - 1);
  return bucket;
}

/**
 * The text encoder: token ids `[L]` → hidden states `[L, dModel]` (float32), L = config.maxLength, with padded
 * positions masked out of self-attention (they still get outputs, which Wan-style models zero before use).
 * One compiled plan per encoder; calls are serialized by the executor.
 */
export class T5Encoder {
  private plan: CompiledPlan | undefined;
  private readonly relBias: Float32Array;

  constructor(
    private readonly native: NativeBinding,
    readonly config: T5Config,
    private readonly weights: WeightStore,
  ) {
    this.relBias = this.buildRelativeBias();
  }

  /** [H, L, L] position bias of layer 0, shared by every layer (T5 v1.1). */
  private buildRelativeBias(): Float32Array {
    const c = this.config;
    const L = c.maxLength;
    const table = this.weights.get('encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight', [c.relativeAttentionNumBuckets, c.numHeads]).data;
    const bias = new Float32Array(c.numHeads * L * L);
    for (let i = 0; i < L; i++)
      for (let j = 0; j < L; j++) {
        const bucket = relativePositionBucket(j - i, c.relativeAttentionNumBuckets, c.relativeAttentionMaxDistance);
        for (let h = 0; h < c.numHeads; h++) bias[(h * L + i) * L + j] = table[bucket * c.numHeads + h];
      }
    return bias;
  }

  private build(): CompiledPlan {
    const c = this.config;
    const L = c.maxLength;
    const inner = c.numHeads * c.dKv;
    const g = new PlanBuilder();
    const w = (name: string, shape: number[]) => g.constant(this.weights.get(name, shape));
    const ids = g.input('ids', [L]);
    const bias = g.input('bias', [1, c.numHeads, L, L]);
    let h = g.embedding(ids, w('shared.weight', [c.vocabSize, c.dModel]), 'shared');
    for (let i = 0; i < c.numLayers; i++) {
      const b = `encoder.block.${i}.layer`;
      const n = g.rmsNorm(h, c.eps, w(`${b}.0.layer_norm.weight`, [c.dModel]), { label: `${b}.0.layer_norm` });
      const q = g.linear(n, w(`${b}.0.SelfAttention.q.weight`, [inner, c.dModel]), undefined, { label: `${b}.0.q` });
      const k = g.linear(n, w(`${b}.0.SelfAttention.k.weight`, [inner, c.dModel]), undefined, { label: `${b}.0.k` });
      const v = g.linear(n, w(`${b}.0.SelfAttention.v.weight`, [inner, c.dModel]), undefined, { label: `${b}.0.v` });
      // T5 folds the 1/sqrt(d) scaling into its initialisation: scale 1.
      const a = g.attention(q, k, v, { batch: 1, heads: c.numHeads, headDim: c.dKv, scale: 1, bias, label: `${b}.0.attention` });
      h = g.gatedAdd(h, g.linear(a, w(`${b}.0.SelfAttention.o.weight`, [c.dModel, inner]), undefined, { label: `${b}.0.o` }));
      const n2 = g.rmsNorm(h, c.eps, w(`${b}.1.layer_norm.weight`, [c.dModel]), { label: `${b}.1.layer_norm` });
      const gate = g.linear(n2, w(`${b}.1.DenseReluDense.wi_0.weight`, [c.dFf, c.dModel]), undefined, { act: 'gelu_tanh', label: `${b}.1.wi_0` });
      const up = g.linear(n2, w(`${b}.1.DenseReluDense.wi_1.weight`, [c.dFf, c.dModel]), undefined, { label: `${b}.1.wi_1` });
      const ff = g.linear(g.mul(gate, up), w(`${b}.1.DenseReluDense.wo.weight`, [c.dModel, c.dFf]), undefined, { label: `${b}.1.wo` });
      h = g.gatedAdd(h, ff);
    }
    g.output('hidden', g.rmsNorm(h, c.eps, w('encoder.final_layer_norm.weight', [c.dModel]), { label: 'final_layer_norm' }));
    return g.compile(this.native);
  }

  /**
   * Encodes one tokenized text into `out` ([L, dModel], float32), zeroing rows at padded positions (Wan's
   * text-encoder wrapper keeps the first `length` rows and pads with zeros).
   */
  async encode(tokens: Encoded, out: NativeTensor): Promise<void> {
    const c = this.config;
    const L = c.maxLength;
    this.plan ??= this.build();
    const ids = createTensor(this.native, [L], tokens.ids);
    const bias = createTensor(this.native, [1, c.numHeads, L, L], this.relBias);
    try {
      const b = bias.data;
      for (let h = 0; h < c.numHeads; h++)
        for (let i = 0; i < L; i++)
          for (let j = tokens.length; j < L; j++) b[(h * L + i) * L + j] = -Infinity;
      await this.plan.run({ ids, bias, hidden: out });
      out.data.fill(0, tokens.length * c.dModel);
    } finally {
      ids.dispose();
      bias.dispose();
    }
  }

  dispose(): void {
    this.plan?.dispose();
    this.plan = undefined;
  }
}
