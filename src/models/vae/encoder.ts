import { OmniError } from '../../errors';
import type { NativeBinding, NativeTensor } from '../../native/binding';
import { createTensor } from '../../native/binding';
import { LruCache } from '../../native/lru-cache';
import { CompiledPlan, PlanBuilder, type Value } from '../../native/plan-builder';
import type { ParamSpec, WeightStore } from '../weights/weight-store';
import { convOp, convParams, normOp, normParams, resampleConvOp, resampleParams, resBlockOp, resBlockParams, vaeLevels, type VaeLevel, type WeightLookup } from './blocks';
import type { FrameDims } from './conv-history';
import { vaeScaleFactor, type VaeConfig } from './config';

/**
 * Encoder levels from full resolution down: the decoder's widths reversed (`channels[n−1]` at full resolution …
 * `channels[0]` at the latent resolution). Level i has `numResBlocks` residual blocks (the first changes the width
 * from the previous level's) and, except the last, a width-preserving 2× spatial downsampler
 * (`encoder.down_blocks.{i}.downsamplers.0.resample.1`, a Conv2d 3×3, stride 2) — the mirror of the decoder's up blocks.
 */
function encoderLevels(c: VaeConfig): VaeLevel[] {
  return vaeLevels([...c.channels].reverse(), c.numResBlocks, 'encoder.down_blocks', 'downsamplers');
}

/** Parameter names (diffusers `AutoencoderKLWan` encoder naming + `quant_conv`) and shapes; mirrors `vaeDecoderParams`. */
export function vaeEncoderParams(c: VaeConfig): ParamSpec[] {
  const kt = c.temporalKernel;
  const levels = encoderLevels(c);
  const first = levels[0].channels;
  const last = levels[levels.length - 1].channels;
  const p: ParamSpec[] = [...convParams('encoder.conv_in', first, 3, [kt, 3, 3])];
  for (const level of levels) {
    for (const b of level.blocks) p.push(...resBlockParams(b, kt));
    if (level.resample) p.push(...resampleParams(level.resample, level.channels));
  }
  p.push(...resBlockParams({ name: 'encoder.mid_block.resnets.0', cin: last, cout: last }, kt));
  p.push(normParams('encoder.norm_out', last), ...convParams('encoder.conv_out', 2 * c.zDim, last, [kt, 3, 3]));
  p.push(...convParams('quant_conv', 2 * c.zDim, 2 * c.zDim, [1, 1, 1]));
  return p;
}

/** Latent height/width for a video height/width: ⌊·/2⌋ once per downsampler (Wan's ZeroPad2d(0,1,0,1) + stride 2). */
export function vaeEncodedSize(c: VaeConfig, height: number, width: number): { height: number; width: number } {
  let h = height;
  let w = width;
  for (let i = 1; i < c.channels.length; i++) {
    h = Math.floor(h / 2);
    w = Math.floor(w / 2);
  }
  return { height: h, width: w };
}

/**
 * VAE encoder, the mirror of `VaeDecoder`: RGB frames `[F, H, W, 3]` in [−1, 1] (channels-last float32, the
 * decoder's output layout) → normalised latent mean `[1, zDim, F, h, w]` (channels-first, the DiT's and decoder's
 * input layout), h = ⌊H/2⌋ per downsampler (= H/s for sizes divisible by s = vaeScaleFactor).
 *
 * Structure (diffusers `AutoencoderKLWan` encoder blocks in the simplified topology of the decoder; see
 * tools/reference/causal_reference.py `WanVaeEncoder`): causal `conv_in` (kt×3×3), per level residual blocks
 * x + conv2(silu(norm2(conv1(silu(norm1(x)))))) (1×1×1 shortcut when widths differ), then a downsampler
 * (`WanResample('downsample2d')`: per frame ZeroPad2d((0, 1, 0, 1)) + Conv2d 3×3 stride 2), `mid_block.resnets.0`,
 * RMS `norm_out`, SiLU, causal `conv_out` → 2·zDim channels (mean, logvar), `quant_conv` (1×1×1); the mean is
 * normalised as (mean − latentsMean) / latentsStd (what `VaeDecoder` inverts). Causal in time: frame f depends on
 * frames ≤ f only (kt − 1 zero frames before frame 0), no temporal downsampling.
 *
 * The stride-2 convolution is composed from existing ops: output (i, j) of the padded stride-2 conv reads input rows
 * 2i … 2i+2 and columns 2j … 2j+2 (row/column H, W being the zero pad), which is exactly the stride-1 'same'
 * (pad 1) conv at (2i+1, 2j+1). So the plan runs the stride-1 conv (conv3d with kt = 1) and gathers the odd rows and
 * columns with permutes and a view (4× the arithmetic of a strided conv; the encoder is not on the per-step path).
 */
export class VaeEncoder {
  /** Compiled plans per shape (LRU, so varying sizes keep native memory bounded). */
  private readonly plans = new LruCache<CompiledPlan>(4, (p) => p.dispose());
  /** −latentsMean and 1/latentsStd over the 2·zDim channels (0 and 1 on the logvar half). */
  private readonly norm: { negMean: NativeTensor; invStd: NativeTensor };

  constructor(
    private readonly native: NativeBinding,
    readonly config: VaeConfig,
    private readonly weights: WeightStore,
  ) {
    const z = config.zDim;
    const negMean = new Float32Array(2 * z);
    const invStd = new Float32Array(2 * z).fill(1);
    for (let i = 0; i < z; i++) {
      negMean[i] = -config.latentsMean[i];
      invStd[i] = 1 / config.latentsStd[i];
    }
    this.norm = { negMean: createTensor(native, [2 * z], negMean), invStd: createTensor(native, [2 * z], invStd) };
  }

  get scaleFactor(): number {
    return vaeScaleFactor(this.config);
  }

  private build(F: number, height: number, width: number): CompiledPlan {
    const c = this.config;
    const kt = c.temporalKernel;
    const g = new PlanBuilder();
    const W: WeightLookup = (name, shape) => g.constant(this.weights.get(name, shape));
    let H = height;
    let Wd = width;
    const dims = (): FrameDims => ({ frames: F, height: H, width: Wd });
    /** Odd rows and columns of channels-last frames [F, H, W, C] → [F, ⌊H/2⌋, ⌊W/2⌋, C]. */
    const takeOdd = (y: Value, ch: number, label: string): Value => {
      const Ho = Math.floor(H / 2);
      const Wo = Math.floor(Wd / 2);
      const block = F * Ho * Wo * ch;
      if (H % 2 === 0 && Wd % 2 === 0) {
        // [F, Ho, 2, Wo, 2, C] → [2 (row parity), 2 (column parity), F, Ho, Wo, C]; parity (1, 1) is block 3.
        const p = g.permute(y, [F, Ho, 2, Wo, 2, ch], [2, 4, 0, 1, 3, 5], `${label}.stride2`);
        return g.slice(p, 3 * block, [F, Ho, Wo, ch]);
      }
      // Odd sizes: the last row/column (index n − 1, even) is never read; cut it off with views, rows/columns outermost.
      const rowsFirst = g.permute(y, [F, H, Wd, ch], [1, 2, 0, 3], `${label}.rows_first`); // [H, W, F, C]
      const cols = g.permute(g.slice(rowsFirst, 0, [2 * Ho, Wd, F, ch]), [2 * Ho, Wd, F, ch], [1, 0, 2, 3], `${label}.cols_first`); // [W, 2Ho, F, C]
      const p = g.permute(g.slice(cols, 0, [Wo, 2, Ho, 2, F, ch]), [Wo, 2, Ho, 2, F, ch], [1, 3, 4, 2, 0, 5], `${label}.stride2`); // [2, 2, F, Ho, Wo, C]
      return g.slice(p, 3 * block, [F, Ho, Wo, ch]);
    };

    const levels = encoderLevels(c);
    const video = g.input('video', [F, H, Wd, 3]);
    let x = convOp(g, W, video, 'encoder.conv_in', levels[0].channels, 3, [kt, 3, 3], dims());
    for (const level of levels) {
      for (const b of level.blocks) x = resBlockOp(g, W, x, b, kt, dims());
      if (level.resample) {
        const full = resampleConvOp(g, W, x, level.resample, level.channels, dims());
        x = takeOdd(full, level.channels, level.resample);
        H = Math.floor(H / 2);
        Wd = Math.floor(Wd / 2);
      }
    }
    const last = levels[levels.length - 1].channels;
    const z = c.zDim;
    x = resBlockOp(g, W, x, { name: 'encoder.mid_block.resnets.0', cin: last, cout: last }, kt, dims());
    x = convOp(g, W, g.silu(normOp(g, W, x, 'encoder.norm_out', last)), 'encoder.conv_out', 2 * z, last, [kt, 3, 3], dims());
    x = convOp(g, W, x, 'quant_conv', 2 * z, 2 * z, [1, 1, 1], dims());
    // (mean − latentsMean) / latentsStd on the first zDim channels, then channels-first and keep the mean half.
    x = g.mul(g.add(x, g.constant(this.norm.negMean), 'latents_mean'), g.constant(this.norm.invStd), 'latents_std');
    const cf = g.permute(x, [F, H, Wd, 2 * z], [3, 0, 1, 2], 'to_channels_first');
    g.output('latents', g.slice(cf, 0, [1, z, F, H, Wd]));
    return g.compile(this.native);
  }

  /**
   * Encodes `video` `[F, H, W, 3]` (values in [−1, 1]) into `out` `[1, zDim, F, h, w]` (normalised latent mean),
   * h, w = `vaeEncodedSize(config, H, W)`.
   */
  async encode(video: NativeTensor, out: NativeTensor, dims: { frames: number; height: number; width: number }): Promise<void> {
    const { frames: F, height: H, width: W } = dims;
    this.latentSize(H, W);
    const key = `${F}x${H}x${W}`;
    const plan = this.plans.getOrCreate(key, () => this.build(F, H, W));
    await plan.run({ video, latents: out });
  }

  /**
   * Encodes one RGB24 image (the first frame of an image-to-world session) into its normalised latent mean
   * `[zDim, 1, h, w]` (float32, channels-first: the layout of one frame of `[1, zDim, F, h, w]`, what the DiT and
   * `VaeDecoder` take), h, w = `vaeEncodedSize(config, height, width)`. The image runs as a one-frame video, so the
   * causal convs see zero history, as for the first frame of a video.
   * @param rgb `height · width · 3` bytes, row-major RGB24; mapped to [−1, 1] by `fromRgb24`.
   * @throws OmniError OMNIRX_ERR_INVALID_REQUEST naming `width`, `height` or `rgb` for a non-integer or non-positive
   *   size or a buffer of the wrong length; OMNIRX_ERR_UNSUPPORTED_VALUE when the image is smaller than the scale factor.
   */
  async encodeImage(rgb: Uint8Array, width: number, height: number): Promise<Float32Array> {
    for (const [field, v] of [['width', width], ['height', height]] as const) {
      if (!Number.isSafeInteger(v) || v < 1) throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `VaeEncoder.encodeImage: ${field} must be an integer ≥ 1, got ${v}`);
    }
    if (rgb.length !== width * height * 3) throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `VaeEncoder.encodeImage: rgb has ${rgb.length} bytes, expected width · height · 3 = ${width * height * 3}`);
    const lat = this.latentSize(height, width);
    const video = createTensor(this.native, [1, height, width, 3], fromRgb24(rgb));
    const out = createTensor(this.native, [1, this.config.zDim, 1, lat.height, lat.width]);
    try {
      await this.encode(video, out, { frames: 1, height, width });
      return out.data.slice();
    } finally {
      video.dispose();
      out.dispose();
    }
  }

  /**
   * `vaeEncodedSize` of a `height × width` video.
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE when it is smaller than 1×1 (too small for the downsamplers).
   */
  private latentSize(height: number, width: number): { height: number; width: number } {
    const lat = vaeEncodedSize(this.config, height, width);
    if (lat.height < 1 || lat.width < 1) throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `VaeEncoder: ${height}×${width} is too small for ${this.config.channels.length - 1} downsamplers`);
    return lat;
  }

  dispose(): void {
    this.plans.clear();
    this.norm.negMean.dispose();
    this.norm.invStd.dispose();
  }
}

/** Converts RGB24 bytes to the encoder's input range: x / 127.5 − 1 in [−1, 1] (the inverse of `toRgb24`). */
export function fromRgb24(rgb: Uint8Array): Float32Array {
  const out = new Float32Array(rgb.length);
  for (let i = 0; i < rgb.length; i++) out[i] = rgb[i] / 127.5 - 1;
  return out;
}
