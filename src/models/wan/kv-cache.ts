import { OmniError } from '../../errors';
import { createTensor, type NativeBinding, type NativeTensor } from '../../native/binding';

/** Geometry of a chunk KV cache (see `KVCache`). */
export interface KVCacheConfig {
  /** Transformer blocks (one K and one V buffer each). */
  layers: number;
  /** Model width H·D (keys and values are stored with all heads side by side, as the attention op reads them). */
  dim: number;
  /** Tokens per latent frame (h/ph · w/pw). */
  tokensPerFrame: number;
  /** C: latent frames per chunk (the scratch region holds one chunk). */
  chunkFrames: number;
  /** S: the first S committed frames, pinned for the whole rollout ("attention sink"). */
  sinkFrames: number;
  /** W: how many of the most recent committed non-sink frames stay attendable. */
  windowFrames: number;
}

/**
 * Per-layer key/value cache of a block-causal rollout (CausVid, Yin et al. 2025; Self-Forcing, Huang et al. 2025),
 * in preallocated native buffers: nothing is allocated after construction, however long the rollout.
 *
 * Layout. For every layer l, `k(l)` and `v(l)` are float32 tensors `[S + W + C, tokensPerFrame, dim]` of frame
 * slots, each slot holding one latent frame's post-RoPE keys (values) for all heads:
 *
 *     slots [0, S)            sink: committed frames 0 … S−1 (pinned)
 *     slots [S, S + W)        window: a ring; committed non-sink frame f lives in slot S + (f − S) mod W
 *     slots [n, n + C)        scratch for the chunk being processed, n = `validFrames` = min(committed, S + W)
 *
 * Committed frames are written in order, so while the cache fills (committed ≤ S + W) frame f sits in slot f and
 * the scratch follows the last committed frame; once full, the ring overwrites its oldest frame (which is exactly
 * the frame leaving the window: committed frames f with f < S or f ≥ max(S, committed − W) stay). Either way the
 * keys a chunk attends to — cached frames plus its own — are the contiguous slot prefix [0, n + C), which is what
 * the attention op reads (slot order is irrelevant to attention: RoPE was applied before caching, with each frame's
 * absolute index). With W = 0 only the sink and the current chunk are attended.
 *
 * Protocol (what `CausalWanDiT` does): each forward of the current chunk writes its K/V into the scratch slots
 * [n, n + C) of every layer and attends over [0, n + C); a commit then calls `commitScratch()`, which `store`s the
 * scratch K/V into their sink/ring slots and `advance`s. `reset()` empties the cache (buffers are kept), `dispose()`
 * frees them.
 */
export class KVCache {
  readonly config: Readonly<KVCacheConfig>;
  private readonly keys: NativeTensor[] = [];
  private readonly values: NativeTensor[] = [];
  private committed = 0;
  private disposed = false;

  constructor(native: NativeBinding, config: KVCacheConfig) {
    const c = { ...config };
    for (const [name, v, min] of [
      ['layers', c.layers, 1],
      ['dim', c.dim, 1],
      ['tokensPerFrame', c.tokensPerFrame, 1],
      ['chunkFrames', c.chunkFrames, 1],
      ['sinkFrames', c.sinkFrames, 0],
      ['windowFrames', c.windowFrames, 0],
    ] as const) {
      if (!Number.isSafeInteger(v) || v < min) throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `KVCache: ${name} must be an integer ≥ ${min}, got ${v}`);
    }
    this.config = Object.freeze(c);
    const shape = [this.capacityFrames, c.tokensPerFrame, c.dim];
    try {
      for (let l = 0; l < c.layers; l++) {
        this.keys.push(createTensor(native, shape));
        this.values.push(createTensor(native, shape));
      }
    } catch (e) {
      this.dispose();
      throw e;
    }
  }

  /** S + W + C frame slots per layer. */
  get capacityFrames(): number {
    return this.config.sinkFrames + this.config.windowFrames + this.config.chunkFrames;
  }

  /** Floats in one frame slot (tokensPerFrame · dim). */
  get frameFloats(): number {
    return this.config.tokensPerFrame * this.config.dim;
  }

  /** Native bytes held by the K and V buffers of all layers (constant for the cache's lifetime). */
  get bytes(): number {
    return this.disposed ? 0 : 2 * this.config.layers * this.capacityFrames * this.frameFloats * 4;
  }

  /** Frames committed so far = absolute index of the next chunk's first frame. */
  get committedFrames(): number {
    return this.committed;
  }

  /** Committed frames currently attendable = slots [0, validFrames) hold them: min(committed, S + W). */
  get validFrames(): number {
    return Math.min(this.committed, this.config.sinkFrames + this.config.windowFrames);
  }

  /** Keys of `layer`: `[S + W + C, tokensPerFrame, dim]` float32 (post-RoPE, heads side by side). */
  k(layer: number): NativeTensor {
    return this.buffer(this.keys, layer);
  }

  /** Values of `layer`, same layout as `k`. */
  v(layer: number): NativeTensor {
    return this.buffer(this.values, layer);
  }

  /**
   * Slot of committed frame `frame` (sink frames keep their index; a non-sink frame goes to its ring slot), or −1
   * when the frame is not (or no longer) resident.
   */
  slotOf(frame: number): number {
    const { sinkFrames: S, windowFrames: W } = this.config;
    if (!Number.isSafeInteger(frame) || frame < 0 || frame >= this.committed) return -1;
    if (frame < S) return frame;
    if (frame < Math.max(S, this.committed - W)) return -1;
    return S + ((frame - S) % W);
  }

  /** Absolute frame index held by each valid slot [0, validFrames) (sink first, then the ring in slot order). */
  residentFrames(): number[] {
    const out = new Array<number>(this.validFrames).fill(-1);
    const { sinkFrames: S, windowFrames: W } = this.config;
    for (let f = 0; f < Math.min(S, this.committed); f++) out[f] = f;
    for (let f = Math.max(S, this.committed - W); f < this.committed; f++) out[this.slotOf(f)] = f;
    return out;
  }

  /** Attendable committed frames in ascending order (the sink, then the window). */
  attendedFrames(): number[] {
    return this.residentFrames().sort((a, b) => a - b);
  }

  /**
   * Writes the chunk being committed (frames committed … committed + C − 1) into its sink/ring slots of `layer`.
   * Frames that would leave the window within the same chunk (C > W) are skipped. Call `advance` once every layer
   * is stored.
   */
  store(layer: number, k: Float32Array, v: Float32Array): void {
    this.chunkFloats(k, v, 'store');
    const { sinkFrames: S, windowFrames: W, chunkFrames: C } = this.config;
    const ff = this.frameFloats;
    const end = this.committed + C;
    const kd = this.k(layer).data;
    const vd = this.v(layer).data;
    for (let j = 0; j < C; j++) {
      const f = this.committed + j;
      if (f >= S && f < Math.max(S, end - W)) continue;
      const slot = f < S ? f : S + ((f - S) % W);
      kd.set(k.subarray(j * ff, (j + 1) * ff), slot * ff);
      vd.set(v.subarray(j * ff, (j + 1) * ff), slot * ff);
    }
  }

  /**
   * Commits the chunk whose K/V sit in the scratch slots [validFrames, validFrames + C) of every layer (written there
   * by the chunk's forward): moves them into their sink/ring slots (`store`) and `advance`s.
   */
  commitScratch(): void {
    const n = this.validFrames * this.frameFloats;
    const m = n + this.config.chunkFrames * this.frameFloats;
    for (let l = 0; l < this.config.layers; l++) this.store(l, this.k(l).data.subarray(n, m), this.v(l).data.subarray(n, m));
    this.advance();
  }

  /** Marks one chunk (C frames) as committed. */
  advance(): void {
    this.assertLive();
    this.committed += this.config.chunkFrames;
  }

  /** Empties the cache for a new rollout; the buffers are kept (and not cleared: invalid slots are never read). */
  reset(): void {
    this.committed = 0;
  }

  /** Frees the native buffers. Idempotent; the cache is unusable afterwards. */
  dispose(): void {
    this.disposed = true;
    for (const t of [...this.keys, ...this.values]) t.dispose();
    this.keys.length = 0;
    this.values.length = 0;
  }

  private buffer(list: NativeTensor[], layer: number): NativeTensor {
    this.assertLive();
    const t = list[layer];
    if (t === undefined) throw new RangeError(`KVCache: layer ${layer} outside [0, ${this.config.layers})`);
    return t;
  }

  private chunkFloats(k: Float32Array, v: Float32Array, what: string): number {
    this.assertLive();
    const n = this.config.chunkFrames * this.frameFloats;
    if (k.length < n || v.length < n) throw new RangeError(`KVCache.${what}: need ${n} floats of K and V, got ${k.length} / ${v.length}`);
    return n;
  }

  private assertLive(): void {
    if (this.disposed) throw new OmniError('OMNIRX_ERR_NATIVE', 'KVCache: used after dispose()');
  }
}
