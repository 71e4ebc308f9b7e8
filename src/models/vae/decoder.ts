import { OmniError } from '../../errors';
import type { NativeBinding, NativeTensor } from '../../native/binding';
import { createTensor } from '../../native/binding';
import { LruCache } from '../../native/lru-cache';
import { CompiledPlan, PlanBuilder } from '../../native/plan-builder';
import type { ParamSpec, WeightStore } from '../weights/weight-store';
import { convOp, convParams, normOp, normParams, resampleConvOp, resampleParams, resBlockOp, resBlockParams, vaeLevels, type VaeLevel, type WeightLookup } from './blocks';
import type { FrameDims } from './conv-history';
import { vaeScaleFactor, type VaeConfig } from './config';
import { ConvHistoryRecorder } from './conv-history';
import { VaeDecodeStream, type VaeStreamDims } from './decode-stream';

/** Decoder levels from the latent resolution up (`decoder.up_blocks.{i}`), widths `channels[0]` … `channels[n−1]`. */
function decoderLevels(c: VaeConfig): VaeLevel[] {
  return vaeLevels(c.channels, c.numResBlocks, 'decoder.up_blocks', 'upsamplers');
}

/** Parameter names (diffusers `AutoencoderKLWan` decoder naming) and shapes. */
export function vaeDecoderParams(c: VaeConfig): ParamSpec[] {
  const kt = c.temporalKernel;
  const c0 = c.channels[0];
  const p: ParamSpec[] = [...convParams('post_quant_conv', c.zDim, c.zDim, [1, 1, 1]), ...convParams('decoder.conv_in', c0, c.zDim, [kt, 3, 3])];
  p.push(...resBlockParams({ name: 'decoder.mid_block.resnets.0', cin: c0, cout: c0 }, kt));
  for (const level of decoderLevels(c)) {
    for (const b of level.blocks) p.push(...resBlockParams(b, kt));
    if (level.resample) p.push(...resampleParams(level.resample, level.channels));
  }
  const last = c.channels[c.channels.length - 1];
  p.push(normParams('decoder.norm_out', last), ...convParams('decoder.conv_out', 3, last, [kt, 3, 3]));
  return p;
}

/**
 * VAE decoder: latents `[1, zDim, F, h, w]` (channels-first, as the DiT produces them) → RGB frames
 * `[F, h·s, w·s, 3]` in [−1, 1] (channels-last, float32), s = vaeScaleFactor. Internally channels-last so a
 * convolution is im2col + GEMM and a channel norm is a row norm. Each residual block is
 * x + conv2(silu(norm2(conv1(silu(norm1(x)))))) with a 1×1×1 shortcut when widths differ (Wan `ResidualBlock`).
 */
export class VaeDecoder {
  /** Compiled plans per shape (LRU, so varying sizes keep native memory bounded). */
  private readonly plans = new LruCache<CompiledPlan>(4, (p) => p.dispose());
  private readonly stats: { mean: NativeTensor; std: NativeTensor };

  constructor(
    private readonly native: NativeBinding,
    readonly config: VaeConfig,
    private readonly weights: WeightStore,
  ) {
    this.stats = { mean: createTensor(native, [config.zDim], config.latentsMean), std: createTensor(native, [config.zDim], config.latentsStd) };
  }

  get scaleFactor(): number {
    return vaeScaleFactor(this.config);
  }

  private build(F: number, h: number, w: number): CompiledPlan {
    const g = new PlanBuilder();
    this.record(g, F, h, w);
    return g.compile(this.native);
  }

  /**
   * Records the decoder into `g`: input slot `latents` `[1, zDim, F, h, w]`, output slot `rgb` `[F, h·s, w·s, 3]`,
   * plus the history slots of every causal conv when `history` is given (streaming plans).
   */
  private record(g: PlanBuilder, F: number, h: number, w: number, history?: ConvHistoryRecorder): void {
    const c = this.config;
    const kt = c.temporalKernel;
    const W: WeightLookup = (name, shape) => g.constant(this.weights.get(name, shape));
    let H = h;
    let Wd = w;
    const dims = (): FrameDims => ({ frames: F, height: H, width: Wd });

    const latents = g.input('latents', [1, c.zDim, F, h, w]);
    let x = g.permute(latents, [c.zDim, F, h, w], [1, 2, 3, 0], 'to_channels_last');
    x = g.add(g.mul(x, g.constant(this.stats.std), 'latents_std'), g.constant(this.stats.mean), 'latents_mean');
    x = convOp(g, W, x, 'post_quant_conv', c.zDim, c.zDim, [1, 1, 1], dims());
    x = convOp(g, W, x, 'decoder.conv_in', c.channels[0], c.zDim, [kt, 3, 3], dims(), history);
    x = resBlockOp(g, W, x, { name: 'decoder.mid_block.resnets.0', cin: c.channels[0], cout: c.channels[0] }, kt, dims(), history);
    for (const level of decoderLevels(c)) {
      for (const b of level.blocks) x = resBlockOp(g, W, x, b, kt, dims(), history);
      if (level.resample) {
        x = g.upsample2x(x, { frames: F, height: H, width: Wd, channels: level.channels }, `${level.resample}.upsample`);
        H *= 2;
        Wd *= 2;
        x = resampleConvOp(g, W, x, level.resample, level.channels, dims());
      }
    }
    const last = c.channels[c.channels.length - 1];
    x = convOp(g, W, g.silu(normOp(g, W, x, 'decoder.norm_out', last)), 'decoder.conv_out', 3, last, [kt, 3, 3], dims(), history);
    g.output('rgb', x);
  }

  /** Decodes `latents` [1, zDim, F, h, w] into `out` [F, h·s, w·s, 3] (values in about [−1, 1]). */
  async decode(latents: NativeTensor, out: NativeTensor, dims: { frames: number; height: number; width: number }): Promise<void> {
    const key = `${dims.frames}x${dims.height}x${dims.width}`;
    const plan = this.plans.getOrCreate(key, () => this.build(dims.frames, dims.height, dims.width));
    await plan.run({ latents, rgb: out });
  }

  /**
   * A stream that decodes one video chunk by chunk with the causal convs' temporal state carried across chunks, so
   * the chunks join seamlessly (identical to a one-shot decode of the whole video; see `VaeDecodeStream`). `dims` is
   * the chunk size in latent frames and the latent height/width; any frames ≥ 1 works. The stream shares this
   * decoder's weights and compiles its own plan once; dispose it before or after the decoder.
   * @throws OmniError OMNIRX_ERR_INVALID_REQUEST naming the field when a dimension is not an integer ≥ 1.
   */
  createStream(dims: { frames: number /* per chunk */; height: number; width: number /* latent */ }): VaeDecodeStream {
    for (const field of ['frames', 'height', 'width'] as const) {
      const v = dims[field];
      if (!Number.isSafeInteger(v) || v < 1) throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `VaeDecoder.createStream: ${field} must be an integer ≥ 1, got ${v}`);
    }
    const stream: VaeStreamDims = { frames: dims.frames, height: dims.height, width: dims.width };
    const g = new PlanBuilder();
    const history = new ConvHistoryRecorder(g);
    this.record(g, stream.frames, stream.height, stream.width, history);
    return new VaeDecodeStream(this.native, g.compile(this.native), history.specs, stream, this.config.zDim, this.scaleFactor);
  }

  dispose(): void {
    this.plans.clear();
    this.stats.mean.dispose();
    this.stats.std.dispose();
  }
}

/** Converts decoder output in [−1, 1] to RGB24 bytes: round((clamp(x, −1, 1) + 1) · 127.5). */
export function toRgb24(x: Float32Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const v = x[i] > 1 ? 1 : x[i] < -1 ? -1 : x[i];
    out[i] = Math.round((v + 1) * 127.5);
  }
  return out;
}
