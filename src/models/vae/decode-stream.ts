import { OmniError } from '../../errors';
import { createTensor, type NativeBinding, type NativeTensor } from '../../native/binding';
import type { CompiledPlan } from '../../native/plan-builder';
import type { ConvHistorySpec } from './conv-history';

/** Chunk size of a decode stream, in latent frames and latent rows/columns. */
export interface VaeStreamDims {
  frames: number;
  height: number;
  width: number;
}

function invalid(message: string): never {
  throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `VaeDecodeStream: ${message}`);
}

function checkSize(field: string, t: NativeTensor, shape: readonly number[]): void {
  const want = shape.reduce((a, b) => a * b, 1);
  if (t.numel !== want) invalid(`${field} has shape [${t.shape.join(', ')}] (${t.numel} elements), expected [${shape.join(', ')}] (${want})`);
}

/**
 * Chunk-by-chunk decoding of one video with the causal VAE decoder (made by `VaeDecoder.createStream`): every causal
 * conv (kt > 1) reads the previous chunk's last kt − 1 input frames instead of zero padding, so decoding a video in
 * chunks of F latent frames gives the same frames as decoding it in one call (the first chunk sees zeros, exactly
 * like the one-shot decode). Any F ≥ 1 works. When F ≥ kt − 1 the plan writes the new history (the last kt − 1
 * input frames) into a second buffer per conv, swapped with the current one after the run (double buffering, no
 * per-chunk allocation). When F < kt − 1 the plan writes this chunk's F input frames into a tail buffer and, after
 * the run, the history is shifted by F frames in place with the tail appended (a host-side copy of kt − 1 frames).
 *
 * State per causal conv: the current history `[kt − 1, H, W, Ci]` plus the next one (F ≥ kt − 1) or an F-frame tail
 * (F < kt − 1), all float32. A chunk changes the state only once its run has succeeded: a
 * decode that throws (wrong sizes, a kernel failure) leaves the history as it was. One chunk at a time: `decode`
 * and `reset` reject while a decode is in flight. Weights are shared with the decoder; the plan is the stream's own.
 */
export class VaeDecodeStream {
  private readonly cur: NativeTensor[];
  /** Per conv: the next history (F ≥ kt − 1, swapped with `cur` after a run) or the F-frame tail (F < kt − 1). */
  private readonly out: NativeTensor[];
  private busy = false;
  private disposed = false;
  /** Latent input shape `[1, zDim, F, h, w]`. */
  readonly latentShape: readonly number[];
  /** RGB output shape `[F, h·s, w·s, 3]`. */
  readonly outputShape: readonly number[];

  constructor(
    native: NativeBinding,
    private readonly plan: CompiledPlan,
    private readonly specs: readonly ConvHistorySpec[],
    readonly dims: VaeStreamDims,
    zDim: number,
    scaleFactor: number,
  ) {
    const { frames: F, height: h, width: w } = dims;
    this.latentShape = [1, zDim, F, h, w];
    this.outputShape = [F, h * scaleFactor, w * scaleFactor, 3];
    this.cur = specs.map((s) => createTensor(native, [s.frames, s.frameFloats]));
    this.out = specs.map((s) => createTensor(native, [s.tailFrames, s.frameFloats]));
    this.reset();
  }

  /** Native bytes held by the stream: history and next/tail buffers plus the plan's arena; 0 after `dispose`. */
  get bytes(): number {
    if (this.disposed) return 0;
    let n = this.plan.arenaBytes;
    for (const t of [...this.cur, ...this.out]) n += t.numel * 4;
    return n;
  }

  /**
   * Decodes the next chunk: `latents` `[1, zDim, F, h, w]` (float32, channels-first, normalised as the DiT produces
   * them) into `out` `[F, h·s, w·s, 3]` (float32 RGB, about [−1, 1], channels-last), then carries each causal conv's
   * history to the next chunk.
   * @throws (rejects with) OmniError OMNIRX_ERR_INVALID_REQUEST when `latents` or `out` has the wrong number of
   *   elements, the stream is disposed or a decode is in flight; OMNIRX_ERR_NATIVE when the run fails. The stream
   *   state is unchanged in every case.
   */
  async decode(latents: NativeTensor, out: NativeTensor): Promise<void> {
    this.checkIdle('decode');
    checkSize('latents', latents, this.latentShape);
    checkSize('out', out, this.outputShape);
    const bindings: Record<string, NativeTensor> = { latents, rgb: out };
    this.specs.forEach((s, i) => {
      bindings[s.input] = this.cur[i];
      bindings[s.output] = this.out[i];
    });
    this.busy = true;
    try {
      await this.plan.run(bindings);
    } finally {
      this.busy = false;
    }
    if (this.disposed) return;
    this.specs.forEach((s, i) => {
      if (s.tailFrames === s.frames) {
        [this.cur[i], this.out[i]] = [this.out[i], this.cur[i]];
        return;
      }
      const history = this.cur[i].data;
      history.copyWithin(0, s.tailFrames * s.frameFloats);
      history.set(this.out[i].data, (s.frames - s.tailFrames) * s.frameFloats);
    });
  }

  /**
   * Starts a new video: the history goes back to zeros (the next chunk decodes like a first chunk).
   * @throws OmniError OMNIRX_ERR_INVALID_REQUEST when disposed or while a decode is in flight.
   */
  reset(): void {
    this.checkIdle('reset');
    for (const t of this.cur) t.data.fill(0);
  }

  /** Frees the history buffers and the plan (weights stay with the decoder). Idempotent. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.plan.dispose();
    for (const t of [...this.cur, ...this.out]) t.dispose();
  }

  private checkIdle(what: string): void {
    if (this.disposed) invalid(`${what} after dispose()`);
    if (this.busy) invalid(`${what} while the previous chunk is still decoding (await each decode first)`);
  }
}
