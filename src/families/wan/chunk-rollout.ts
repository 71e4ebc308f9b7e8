import { firstNonFinite } from '../../pipeline/guidance';
import { OmniError } from '../../errors';
import { createTensor, type NativeBinding, type NativeTensor } from '../../native/binding';
import type { SlabSession } from '../../cache/slab-pool';
import type { ChunkActions } from '../../models/action-module';
import type { CausalWanDiT } from '../../models/wan/causal-dit';
import type { WanT2VModel } from './model';
import { pixelStride, vaeScale, type ModelSpec } from './model-spec';
import { toRgb24 } from '../../models/vae/decoder';
import type { VaeDecodeStream } from '../../models/vae/decode-stream';
import { renoiseSeed, Rng } from '../../util/rng';
import { flowMatchSigmas, stochasticEulerStep } from '../../pipeline/samplers/flow-match-euler';

/** Geometry and schedule of one world session's rollout. */
export interface ChunkRolloutConfig {
  /** C: latent frames per chunk (= video frames: the VAE has no temporal compression). */
  chunkFrames: number;
  /** Latent frames pinned as the attention sink (a multiple of C). */
  sinkFrames: number;
  /** Most recent committed latent frames kept attendable (a multiple of C). */
  localWindowFrames: number;
  /** Denoise steps per chunk (flow-matching Euler over the shifted schedule). */
  steps: number;
  /**
   * Denoise steps of chunk 0, which has no committed history: the prompt alone decides the first frame, as in T2V
   * sampling, and a few-step schedule from pure noise gives a blurred mean frame that the rollout then carries on.
   * Default `steps`.
   */
  firstChunkSteps?: number;
  /** Flow shift of the per-chunk schedule (`flowMatchSigmas(steps, flowShift)`). */
  flowShift: number;
  /**
   * Share of fresh noise re-noising each Euler step of every chunk, in [0, 1] (`stochasticEulerStep`); default 0, the
   * deterministic Euler step. The fresh noise of chunk k's attempt comes from `renoiseSeed(chunkSeed(seed, k))`.
   */
  eta?: number;
  /** Video width and height in pixels (multiples of the model's pixel stride). */
  width: number;
  height: number;
  /** Seed of the session: chunk k's initial noise is drawn from `chunkSeed(seed, k)`. */
  seed: number;
}

/** One chunk being generated: its own noise, sampler position and actions. Dropped freely on a flush. */
export interface ChunkAttempt {
  /** Index of the chunk in the session (0, 1, …). */
  readonly chunk: number;
  /** Latents `[C_in, C, h, w]` (channels-first), advanced in place by each step. */
  readonly latents: Float32Array;
  readonly actions: ChunkActions | undefined;
  /** Denoise steps of this chunk (`ChunkRollout.stepsOf(chunk)`; 0 for a clean chunk). */
  readonly total: number;
  /** Next denoise step (0 … total). */
  index: number;
  /** Standard normal source of the chunk's re-noising (η > 0), from `renoiseSeed(chunkSeed(seed, chunk))`: fresh per attempt. */
  readonly renoise: Rng;
}

/** What one denoise step of a chunk reports. */
export interface ChunkStepResult {
  /** 0-based index of the step that ran. */
  index: number;
  total: number;
  /** σ the step started from, and its model timestep σ·1000. */
  sigma: number;
  timestep: number;
}

/** A decoded chunk: RGB24 frames `[C, H, W, 3]` and its position in the session. */
export interface DecodedChunk {
  chunk: number;
  /** Index of the chunk's first video frame in the session. */
  firstFrame: number;
  frames: Uint8Array<ArrayBuffer>;
}

/** Seed of chunk `k`'s noise: a fixed mix of the session seed and the chunk index (Weyl constant 0x9e3779b1). */
export function chunkSeed(seed: number, chunk: number): number {
  return (seed + Math.imul(chunk + 1, 0x9e3779b1)) >>> 0;
}

/**
 * The state of one world session's chunked causal rollout (docs/design.md §3 `ChunkRollout`): a block-causal DiT with its
 * own chunk KV cache, a streaming VAE decoder that carries its temporal state across chunks, and the session's
 * claim on the chunk-KV slab pool. The session drives it one scheduler step at a time:
 *
 *   denoiseStep(attempt) × stepsOf(chunk) → decode(attempt) → (emit) → commitPending() → next chunk …
 *
 * Chunk k's clean latents are committed to the KV cache (the t = 0 forward of CausVid / Self-Forcing) after chunk k
 * has been decoded and emitted, so a frame leaves as soon as it is decoded. An attempt
 * holds only its own latents: a flush drops it and starts a new attempt for the same chunk (same noise, new actions)
 * — nothing committed changes until `decode` succeeds, which marks the attempt as the chunk to commit next.
 *
 * Native calls are serialised per rollout; `settled()` resolves once none is in flight (call it before `dispose`).
 */
export class ChunkRollout {
  private readonly sigmas: Float64Array;
  private readonly firstSigmas: Float64Array;
  private readonly latentsTensor: NativeTensor;
  private readonly rgbTensor: NativeTensor;
  private pending?: { latents: Float32Array; actions: ChunkActions | undefined };
  private committing?: Promise<void>;
  private inflight = new Set<Promise<unknown>>();
  private nextChunk = 0;
  private disposed = false;

  /** Latent grid `[C_in, C, h, w]`. */
  readonly latentShape: readonly [number, number, number, number];

  constructor(
    native: NativeBinding,
    readonly config: Readonly<ChunkRolloutConfig>,
    private readonly dit: CausalWanDiT,
    private readonly decoder: VaeDecodeStream,
    private readonly context: NativeTensor,
    private readonly slabs: SlabSession,
  ) {
    const [, zDim, C, h, w] = decoder.latentShape;
    this.latentShape = [zDim, C, h, w];
    this.sigmas = flowMatchSigmas(config.steps, config.flowShift);
    this.firstSigmas = flowMatchSigmas(config.firstChunkSteps ?? config.steps, config.flowShift);
    this.latentsTensor = createTensor(native, [...decoder.latentShape]);
    this.rgbTensor = createTensor(native, [...decoder.outputShape]);
  }

  /**
   * Builds the rollout's model parts for `model` (block-causal DiT over the shared transformer weights, streaming
   * VAE decoder) and wraps them. `context` is the prompt's text states `[1, Lt, textDim]` (borrowed; the caller keeps
   * it alive until `dispose`).
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE for a size that is not a multiple of the model's pixel stride.
   */
  static create(native: NativeBinding, model: WanT2VModel, config: ChunkRolloutConfig, context: NativeTensor, slabs: SlabSession): ChunkRollout {
    const stride = pixelStride(model.spec);
    for (const [field, v] of [
      ['width', config.width],
      ['height', config.height],
    ] as const) {
      if (v % stride !== 0)
        throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `${field} ${v} is not a multiple of ${stride} (VAE scale × patch size of '${model.spec.id}')`, {
          param: field,
        });
    }
    const s = model.vae.scaleFactor;
    const h = config.height / s;
    const w = config.width / s;
    const dit = model.causalTransformer({
      chunkFrames: config.chunkFrames,
      sinkFrames: config.sinkFrames,
      localWindowFrames: config.localWindowFrames,
      height: h,
      width: w,
      textLen: context.shape[1],
    });
    let decoder: VaeDecodeStream | undefined;
    try {
      decoder = model.vae.createStream({ frames: config.chunkFrames, height: h, width: w });
      return new ChunkRollout(native, config, dit, decoder, context, slabs);
    } catch (e) {
      decoder?.dispose();
      dit.dispose();
      throw e;
    }
  }

  /** Bytes of one chunk-KV slab of this rollout: one chunk's K + V for one layer, float32. */
  static slabBytes(spec: ModelSpec, chunkFrames: number, width: number, height: number): number {
    const t = spec.transformer;
    const s = vaeScale(spec);
    const tokensPerFrame = (height / s / t.patchSize[1]) * (width / s / t.patchSize[2]);
    return chunkFrames * tokensPerFrame * t.dim * 2 * 4;
  }

  /** Chunks started so far (the index the next `startChunk` gets). */
  get chunksStarted(): number {
    return this.nextChunk;
  }

  /** Denoise steps of chunk `chunk`: `firstChunkSteps` for chunk 0, else `steps`. */
  stepsOf(chunk: number): number {
    return this.sigmasOf(chunk).length - 1;
  }

  /** The σ schedule of chunk `chunk` (`stepsOf(chunk) + 1` values, the last 0). */
  private sigmasOf(chunk: number): Float64Array {
    return chunk === 0 ? this.firstSigmas : this.sigmas;
  }

  /** Whether a decoded chunk waits to be committed to the KV cache. */
  get needsCommit(): boolean {
    return this.pending !== undefined;
  }

  /** Native bytes of the rollout: KV cache, plans and staging of the DiT, decoder state, and its own staging. */
  get bytes(): number {
    if (this.disposed) return 0;
    return this.dit.bytes + this.decoder.bytes + (this.latentsTensor.numel + this.rgbTensor.numel) * 4;
  }

  /**
   * Commits the last decoded chunk's clean latents to the KV cache (and its slabs to the session's claim). Idempotent
   * while in flight: a second call returns the same promise; resolves at once when nothing is pending.
   * @throws PoolExhaustedError when the slab pool has no room (the rollout is unchanged).
   */
  commitPending(): Promise<void> {
    if (this.committing !== undefined) return this.committing;
    const p = this.pending;
    if (p === undefined) return Promise.resolve();
    this.slabs.appendChunk();
    const run = this.track(this.dit.commitChunk(p.latents, this.context, p.actions)).then(
      () => {
        this.pending = undefined;
        this.committing = undefined;
      },
      (err: unknown) => {
        this.committing = undefined;
        throw err;
      },
    );
    this.committing = run;
    return run;
  }

  /**
   * Starts the next chunk (or, with `chunk`, a new attempt at a chunk that was flushed): fresh noise ~ N(0, 1) from
   * `chunkSeed(seed, chunk)`, so an attempt's result depends only on the session seed, the chunk index, the actions
   * and the committed history.
   */
  startChunk(actions: ChunkActions | undefined, chunk = this.nextChunk): ChunkAttempt {
    const [c, f, h, w] = this.latentShape;
    const latents = new Float32Array(c * f * h * w);
    new Rng(chunkSeed(this.config.seed, chunk)).fillNormal(latents);
    this.nextChunk = Math.max(this.nextChunk, chunk + 1);
    return { chunk, latents, actions, total: this.stepsOf(chunk), index: 0, renoise: new Rng(renoiseSeed(chunkSeed(this.config.seed, chunk))) };
  }

  /** Starts the chunk that holds given clean latents (image-to-world: the encoded image as chunk 0), no denoising. */
  startCleanChunk(latents: Float32Array): ChunkAttempt {
    if (latents.length !== this.latentsTensor.numel)
      throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `ChunkRollout: clean latents have ${latents.length} values, expected ${this.latentsTensor.numel}`);
    const chunk = this.nextChunk++;
    return { chunk, latents, actions: undefined, total: 0, index: 0, renoise: new Rng(renoiseSeed(chunkSeed(this.config.seed, chunk))) };
  }

  /**
   * Runs denoise step `attempt.index` of the chunk: one DiT forward at σ_i (all C frames at the same σ) and an Euler
   * step x ← x + (σ_{i+1} − σ_i)·v, re-noised by the config's η (`stochasticEulerStep`) when above 0. Requires the previous chunk committed (`commitPending` first).
   * @throws OmniError OMNIRX_ERR_NON_FINITE when the model produced NaN/Inf; OMNIRX_ERR_INTERNAL when called with an
   *   uncommitted previous chunk or after the last step.
   */
  async denoiseStep(attempt: ChunkAttempt): Promise<ChunkStepResult> {
    this.assertLive();
    if (this.pending !== undefined)
      throw new OmniError('OMNIRX_ERR_INTERNAL', 'ChunkRollout: the previous chunk must be committed before the next is denoised');
    const i = attempt.index;
    if (i >= attempt.total) throw new OmniError('OMNIRX_ERR_INTERNAL', `ChunkRollout: chunk ${attempt.chunk} has run all ${attempt.total} steps`);
    const sigmas = this.sigmasOf(attempt.chunk);
    const sigma = sigmas[i];
    const t = sigma * 1000;
    const v = await this.track(
      this.dit.denoiseChunk(attempt.latents, new Array<number>(this.config.chunkFrames).fill(t), this.context, undefined, attempt.actions),
    );
    const bad = firstNonFinite(v);
    if (bad >= 0)
      throw new OmniError('OMNIRX_ERR_NON_FINITE', `chunk ${attempt.chunk} step ${i}: the model produced a non-finite value (${v[bad]}) at element ${bad}`);
    stochasticEulerStep(attempt.latents, v, sigma, sigmas[i + 1], this.config.eta ?? 0, () => attempt.renoise.normal());
    attempt.index = i + 1;
    return { index: i, total: attempt.total, sigma, timestep: t };
  }

  /**
   * Decodes the denoised chunk with the streaming VAE decoder (its causal history carries across chunks, so the
   * stream is seamless) into RGB24 frames `[C, H, W, 3]`, and marks the chunk as the one to commit next.
   * @throws OmniError OMNIRX_ERR_INTERNAL when the chunk has steps left.
   */
  async decode(attempt: ChunkAttempt): Promise<DecodedChunk> {
    this.assertLive();
    if (attempt.index < attempt.total)
      throw new OmniError('OMNIRX_ERR_INTERNAL', `ChunkRollout: chunk ${attempt.chunk} decoded after ${attempt.index} of ${attempt.total} steps`);
    this.latentsTensor.data.set(attempt.latents);
    await this.track(this.decoder.decode(this.latentsTensor, this.rgbTensor));
    this.pending = { latents: attempt.latents, actions: attempt.actions };
    return { chunk: attempt.chunk, firstFrame: attempt.chunk * this.config.chunkFrames, frames: toRgb24(this.rgbTensor.data) };
  }

  /** Resolves once no native call of this rollout is in flight. */
  async settled(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  /** Frees the DiT's KV cache and plans, the decoder state and the staging; releases the slab claim. Idempotent. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.slabs.release();
    this.dit.dispose();
    this.decoder.dispose();
    this.latentsTensor.dispose();
    this.rgbTensor.dispose();
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.inflight.add(p);
    const done = () => this.inflight.delete(p);
    p.then(done, done);
    return p;
  }

  private assertLive(): void {
    if (this.disposed) throw new OmniError('OMNIRX_ERR_INTERNAL', 'ChunkRollout: used after dispose()');
  }
}
