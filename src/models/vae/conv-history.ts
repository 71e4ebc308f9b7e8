import type { PlanBuilder, Value } from '../../native/plan-builder';

/** Frame count and spatial size `H × W` of a channels-last activation `[F, H, W, C]` (what `conv3d` produces). */
export interface FrameDims {
  frames: number;
  height: number;
  width: number;
}

/**
 * The carried temporal state of one causal conv (kt > 1) in a streaming plan: the last kt − 1 frames of its input.
 * All buffers are channels-last float32 frames of `frameFloats` = H·W·Ci elements.
 */
export interface ConvHistorySpec {
  /** The conv's parameter prefix, e.g. `decoder.mid_block.resnets.0.conv1`. */
  conv: string;
  /** Plan input slot `history.{conv}` `[kt − 1, H, W, Ci]`: the previous chunk's last input frames (zeros at start). */
  input: string;
  /** Plan output slot `history_tail.{conv}` `[tailFrames, H, W, Ci]`: the last `tailFrames` frames of this chunk's input. */
  output: string;
  /** kt − 1 frames of history the conv reads before frame 0. */
  frames: number;
  /** min(F, kt − 1): how many of the next history's frames come from this chunk (the rest from the old history). */
  tailFrames: number;
  /** H·W·Ci floats per frame. */
  frameFloats: number;
}

/**
 * Records, while a plan is built, a `history` operand for every causal conv with kt > 1 and an output slot with the
 * tail of that conv's input, so a plan over F-frame chunks can be run chunk after chunk with the same results as one
 * plan over all frames (see `VaeDecodeStream`). Passed to `convOp` / `resBlockOp`; kt = 1 convs get no history.
 */
export class ConvHistoryRecorder {
  readonly specs: ConvHistorySpec[] = [];

  constructor(private readonly g: PlanBuilder) {}

  /**
   * Declares the history input of conv `conv` whose input `x` is `[F, H, W, cin]` and outputs the last
   * min(F, kt − 1) frames of `x`; returns the history value `[kt − 1, H, W, cin]`, or undefined when kt = 1.
   */
  attach(x: Value, conv: string, kt: number, cin: number, dims: FrameDims): Value | undefined {
    if (kt === 1) return undefined;
    const { frames: F, height: H, width: W } = dims;
    const frameFloats = H * W * cin;
    const tailFrames = Math.min(F, kt - 1);
    const spec: ConvHistorySpec = { conv, input: `history.${conv}`, output: `history_tail.${conv}`, frames: kt - 1, tailFrames, frameFloats };
    const history = this.g.input(spec.input, [kt - 1, H, W, cin]);
    this.g.output(spec.output, this.g.slice(x, (F - tailFrames) * frameFloats, [tailFrames, H, W, cin]));
    this.specs.push(spec);
    return history;
  }
}
