import type { NativeBinding, NativeTensor } from '../../native/binding';
import { createTensor } from '../../native/binding';
import { LruCache } from '../../native/lru-cache';
import { CompiledPlan, PlanBuilder, type Value } from '../../native/plan-builder';
import type { ParamSpec, WeightStore } from '../weights/weight-store';
import { vaeScaleFactor, type VaeConfig } from './config';

interface ResBlock {
  name: string;
  cin: number;
  cout: number;
}

function resBlocks(c: VaeConfig): Array<{ blocks: ResBlock[]; upsample?: string; channels: number }> {
  const levels: Array<{ blocks: ResBlock[]; upsample?: string; channels: number }> = [];
  let cin = c.channels[0];
  c.channels.forEach((ch, i) => {
    const blocks: ResBlock[] = [];
    for (let j = 0; j < c.numResBlocks; j++) {
      blocks.push({ name: `decoder.up_blocks.${i}.resnets.${j}`, cin, cout: ch });
      cin = ch;
    }
    levels.push({ blocks, channels: ch, upsample: i < c.channels.length - 1 ? `decoder.up_blocks.${i}.upsamplers.0.resample.1` : undefined });
  });
  return levels;
}

/** Parameter names (diffusers `AutoencoderKLWan` decoder naming) and shapes. */
export function vaeDecoderParams(c: VaeConfig): ParamSpec[] {
  const kt = c.temporalKernel;
  const conv = (name: string, cout: number, cin: number, k: [number, number, number]): ParamSpec[] => [
    { name: `${name}.weight`, shape: [cout, cin, ...k], init: 'normal', std: (cin * k[0] * k[1] * k[2]) ** -0.5 },
    { name: `${name}.bias`, shape: [cout], init: 'zeros' },
  ];
  const res = (b: ResBlock): ParamSpec[] => [
    { name: `${b.name}.norm1.gamma`, shape: [b.cin, 1, 1, 1], init: 'ones' },
    ...conv(`${b.name}.conv1`, b.cout, b.cin, [kt, 3, 3]),
    { name: `${b.name}.norm2.gamma`, shape: [b.cout, 1, 1, 1], init: 'ones' },
    ...conv(`${b.name}.conv2`, b.cout, b.cout, [kt, 3, 3]),
    ...(b.cin !== b.cout ? conv(`${b.name}.conv_shortcut`, b.cout, b.cin, [1, 1, 1]) : []),
  ];
  const c0 = c.channels[0];
  const p: ParamSpec[] = [...conv('post_quant_conv', c.zDim, c.zDim, [1, 1, 1]), ...conv('decoder.conv_in', c0, c.zDim, [kt, 3, 3])];
  p.push(...res({ name: 'decoder.mid_block.resnets.0', cin: c0, cout: c0 }));
  for (const level of resBlocks(c)) {
    for (const b of level.blocks) p.push(...res(b));
    if (level.upsample) {
      p.push({ name: `${level.upsample}.weight`, shape: [level.channels, level.channels, 3, 3], init: 'normal', std: (level.channels * 9) ** -0.5 });
      p.push({ name: `${level.upsample}.bias`, shape: [level.channels], init: 'zeros' });
    }
  }
  const last = c.channels[c.channels.length - 1];
  p.push({ name: 'decoder.norm_out.gamma', shape: [last, 1, 1, 1], init: 'ones' }, ...conv('decoder.conv_out', 3, last, [kt, 3, 3]));
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
    const c = this.config;
    const kt = c.temporalKernel;
    const g = new PlanBuilder();
    const W = (name: string, shape: number[]): Value => g.constant(this.weights.get(name, shape));
    let H = h;
    let Wd = w;
    const conv = (x: Value, name: string, cout: number, cin: number, k: [number, number, number]) =>
      g.conv3d(x, W(`${name}.weight`, [cout, cin, ...k]), W(`${name}.bias`, [cout]), { frames: F, height: H, width: Wd }, { label: name });
    const norm = (x: Value, name: string, ch: number) => g.rmsNorm(x, 1e-12, W(`${name}.gamma`, [ch, 1, 1, 1]), { l2: true, label: name });
    const res = (x: Value, b: ResBlock): Value => {
      const shortcut = b.cin !== b.cout ? conv(x, `${b.name}.conv_shortcut`, b.cout, b.cin, [1, 1, 1]) : x;
      let y = conv(g.silu(norm(x, `${b.name}.norm1`, b.cin)), `${b.name}.conv1`, b.cout, b.cin, [kt, 3, 3]);
      y = conv(g.silu(norm(y, `${b.name}.norm2`, b.cout)), `${b.name}.conv2`, b.cout, b.cout, [kt, 3, 3]);
      return g.add(y, shortcut, `${b.name}.residual`);
    };

    const latents = g.input('latents', [1, c.zDim, F, h, w]);
    let x = g.permute(latents, [c.zDim, F, h, w], [1, 2, 3, 0], 'to_channels_last');
    x = g.add(g.mul(x, g.constant(this.stats.std), 'latents_std'), g.constant(this.stats.mean), 'latents_mean');
    x = conv(x, 'post_quant_conv', c.zDim, c.zDim, [1, 1, 1]);
    x = conv(x, 'decoder.conv_in', c.channels[0], c.zDim, [kt, 3, 3]);
    x = res(x, { name: 'decoder.mid_block.resnets.0', cin: c.channels[0], cout: c.channels[0] });
    for (const level of resBlocks(c)) {
      for (const b of level.blocks) x = res(x, b);
      if (level.upsample) {
        x = g.upsample2x(x, { frames: F, height: H, width: Wd, channels: level.channels }, `${level.upsample}.upsample`);
        H *= 2;
        Wd *= 2;
        const wt = W(`${level.upsample}.weight`, [level.channels, level.channels, 3, 3]);
        x = g.conv3d(x, g.reshape(wt, [level.channels, level.channels, 1, 3, 3]), W(`${level.upsample}.bias`, [level.channels]), { frames: F, height: H, width: Wd }, { label: level.upsample });
      }
    }
    const last = c.channels[c.channels.length - 1];
    x = conv(g.silu(norm(x, 'decoder.norm_out', last)), 'decoder.conv_out', 3, last, [kt, 3, 3]);
    g.output('rgb', x);
    return g.compile(this.native);
  }

  /** Decodes `latents` [1, zDim, F, h, w] into `out` [F, h·s, w·s, 3] (values in about [−1, 1]). */
  async decode(latents: NativeTensor, out: NativeTensor, dims: { frames: number; height: number; width: number }): Promise<void> {
    const key = `${dims.frames}x${dims.height}x${dims.width}`;
    const plan = this.plans.getOrCreate(key, () => this.build(dims.frames, dims.height, dims.width));
    await plan.run({ latents, rgb: out });
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
