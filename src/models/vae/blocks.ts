import type { PlanBuilder, Value } from '../../native/plan-builder';
import type { ParamSpec } from '../weights/weight-store';
import type { ConvHistoryRecorder, FrameDims } from './conv-history';

/**
 * Building blocks shared by `VaeDecoder` and `VaeEncoder`: parameter specs (diffusers `AutoencoderKLWan` naming) and
 * the plan fragments that record convolutions, channel RMS norms and residual blocks. All activations are
 * channels-last `[F, H, W, C]` float32, as both plans keep them.
 */

/** One Wan `ResidualBlock`: its parameter prefix (e.g. `decoder.up_blocks.0.resnets.0`) and input/output widths. */
export interface ResBlock {
  name: string;
  cin: number;
  cout: number;
}

/**
 * One resolution level of the VAE: `blocks` residual blocks ending at width `channels`, and the parameter prefix of
 * the width-preserving 3×3 resampling conv after them (`…upsamplers.0.resample.1` in the decoder,
 * `…downsamplers.0.resample.1` in the encoder), absent on the last level.
 */
export interface VaeLevel {
  blocks: ResBlock[];
  channels: number;
  resample?: string;
}

/** Convolution kernel extent [kt, kh, kw] (frames, rows, columns). */
export type Kernel3 = [number, number, number];

/** Looks up a weight tensor by parameter name and expected shape and returns it as a plan constant. */
export type WeightLookup = (name: string, shape: number[]) => Value;

/**
 * Levels of a decoder or encoder stack: level i ends at width `widths[i]` with `numResBlocks` residual blocks named
 * `{prefix}.{i}.resnets.{j}` (the first takes the previous level's width, level 0 starts at `widths[0]`) and, on
 * every level but the last, a resampler `{prefix}.{i}.{resampler}.0.resample.1`.
 * @param prefix `decoder.up_blocks` or `encoder.down_blocks`.
 * @param resampler `upsamplers` or `downsamplers`.
 */
export function vaeLevels(widths: readonly number[], numResBlocks: number, prefix: string, resampler: string): VaeLevel[] {
  let cin = widths[0];
  return widths.map((ch, i) => {
    const blocks: ResBlock[] = [];
    for (let j = 0; j < numResBlocks; j++) {
      blocks.push({ name: `${prefix}.${i}.resnets.${j}`, cin, cout: ch });
      cin = ch;
    }
    return { blocks, channels: ch, resample: i < widths.length - 1 ? `${prefix}.${i}.${resampler}.0.resample.1` : undefined };
  });
}

/**
 * Specs of a causal conv `{name}.weight` `[cout, cin, kt, kh, kw]` (normal, std 1/√fan-in) and `{name}.bias`
 * `[cout]` (zeros).
 */
export function convParams(name: string, cout: number, cin: number, k: Kernel3): ParamSpec[] {
  return [
    { name: `${name}.weight`, shape: [cout, cin, ...k], init: 'normal', std: (cin * k[0] * k[1] * k[2]) ** -0.5 },
    { name: `${name}.bias`, shape: [cout], init: 'zeros' },
  ];
}

/** Spec of a channel RMS norm's `{name}.gamma` `[ch, 1, 1, 1]` (ones), Wan `RMS_norm` layout. */
export function normParams(name: string, ch: number): ParamSpec {
  return { name: `${name}.gamma`, shape: [ch, 1, 1, 1], init: 'ones' };
}

/**
 * Specs of a residual block: `norm1` (cin), `conv1` (cin → cout, kt×3×3), `norm2` (cout), `conv2` (cout → cout,
 * kt×3×3) and, when widths differ, a 1×1×1 `conv_shortcut`. `kt` is the temporal kernel.
 */
export function resBlockParams(b: ResBlock, kt: number): ParamSpec[] {
  return [
    normParams(`${b.name}.norm1`, b.cin),
    ...convParams(`${b.name}.conv1`, b.cout, b.cin, [kt, 3, 3]),
    normParams(`${b.name}.norm2`, b.cout),
    ...convParams(`${b.name}.conv2`, b.cout, b.cout, [kt, 3, 3]),
    ...(b.cin !== b.cout ? convParams(`${b.name}.conv_shortcut`, b.cout, b.cin, [1, 1, 1]) : []),
  ];
}

/**
 * Specs of a resampler's per-frame Conv2d 3×3 (`{name}.weight` `[ch, ch, 3, 3]`, std 1/√(9·ch); `{name}.bias`
 * `[ch]`), width-preserving.
 */
export function resampleParams(name: string, ch: number): ParamSpec[] {
  return [
    { name: `${name}.weight`, shape: [ch, ch, 3, 3], init: 'normal', std: (ch * 9) ** -0.5 },
    { name: `${name}.bias`, shape: [ch], init: 'zeros' },
  ];
}

/**
 * Records a causal conv with weights `{name}.weight` `[cout, cin, ...k]` and `{name}.bias` `[cout]`:
 * `[F, H, W, cin]` → `[F, H, W, cout]` (same spatial size). Without `history` the conv sees kt − 1 zero frames before
 * frame 0; with it (and kt > 1) it reads them from a per-run history slot and outputs its input's tail (see
 * `ConvHistoryRecorder`).
 */
export function convOp(g: PlanBuilder, W: WeightLookup, x: Value, name: string, cout: number, cin: number, k: Kernel3, dims: FrameDims, history?: ConvHistoryRecorder): Value {
  const h = history?.attach(x, name, k[0], cin, dims);
  return g.conv3d(x, W(`${name}.weight`, [cout, cin, ...k]), W(`${name}.bias`, [cout]), dims, { history: h, label: name });
}

/** Records Wan's channel `RMS_norm` (L2 normalise over channels, eps 1e-12, scale `{name}.gamma` `[ch, 1, 1, 1]`). */
export function normOp(g: PlanBuilder, W: WeightLookup, x: Value, name: string, ch: number): Value {
  return g.rmsNorm(x, 1e-12, W(`${name}.gamma`, [ch, 1, 1, 1]), { l2: true, label: name });
}

/**
 * Records a Wan `ResidualBlock`: x + conv2(silu(norm2(conv1(silu(norm1(x)))))) with a 1×1×1 shortcut conv when
 * widths differ; `[F, H, W, cin]` → `[F, H, W, cout]`. `kt` is the temporal kernel; `history` as in `convOp`.
 */
export function resBlockOp(g: PlanBuilder, W: WeightLookup, x: Value, b: ResBlock, kt: number, dims: FrameDims, history?: ConvHistoryRecorder): Value {
  const shortcut = b.cin !== b.cout ? convOp(g, W, x, `${b.name}.conv_shortcut`, b.cout, b.cin, [1, 1, 1], dims) : x;
  let y = convOp(g, W, g.silu(normOp(g, W, x, `${b.name}.norm1`, b.cin)), `${b.name}.conv1`, b.cout, b.cin, [kt, 3, 3], dims, history);
  y = convOp(g, W, g.silu(normOp(g, W, y, `${b.name}.norm2`, b.cout)), `${b.name}.conv2`, b.cout, b.cout, [kt, 3, 3], dims, history);
  return g.add(y, shortcut, `${b.name}.residual`);
}

/**
 * Records a resampler's per-frame Conv2d 3×3 (pad 1, stride 1) as a kt = 1 conv3d: `[F, H, W, ch]` → `[F, H, W, ch]`
 * with `{name}.weight` `[ch, ch, 3, 3]` and `{name}.bias` `[ch]`.
 */
export function resampleConvOp(g: PlanBuilder, W: WeightLookup, x: Value, name: string, ch: number, dims: FrameDims): Value {
  const wt = W(`${name}.weight`, [ch, ch, 3, 3]);
  return g.conv3d(x, g.reshape(wt, [ch, ch, 1, 3, 3]), W(`${name}.bias`, [ch]), dims, { label: name });
}
