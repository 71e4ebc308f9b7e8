import * as path from 'node:path';
import { OmniError } from 'omnirx';
import type { LoadedModel } from 'omnirx/families';
import { componentTensors, POSITION_FEATURES, TIME_FEATURES, TOY_COMPONENTS, type ToyComponent, type ToySpec } from './spec';
import { readToyWeights, type ToyTensors } from './weights';

/** FNV-1a (32-bit) of a string's UTF-8 bytes. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(s)) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * Text conditioning without a tokenizer or an encoder network: the prompt's words (lower-cased runs of letters and
 * digits) are hashed into the rows of a `[buckets, dim]` table, each with a sign from the hash's top bit, and summed
 * over √(words). Word order does not matter; an empty prompt embeds to zeros.
 */
export class HashedBagOfWords {
  constructor(
    readonly buckets: number,
    readonly dim: number,
    private readonly table: Float32Array,
  ) {}

  embed(text: string): Float32Array {
    const out = new Float32Array(this.dim);
    const words = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
    if (words.length === 0) return out;
    const acc = new Float64Array(this.dim);
    for (const w of words) {
      const h = fnv1a(w);
      const row = (h % this.buckets) * this.dim;
      const sign = h >>> 31 === 1 ? -1 : 1;
      for (let j = 0; j < this.dim; j++) acc[j] += sign * this.table[row + j];
    }
    const scale = 1 / Math.sqrt(words.length);
    for (let j = 0; j < this.dim; j++) out[j] = acc[j] * scale;
    return out;
  }
}

/**
 * The denoiser: a velocity predictor over non-overlapping `patch × patch` RGB patches of the image itself (no
 * latent space). Per patch: h = silu(W_in·x_patch + b_in + W_text·text + W_time·τ(σ) + W_pos·π(patch)), v = W_out·h + b_out,
 * τ(σ) = [sin(kπσ), cos(kπσ)] for k = 1…4 and π the sine and cosine of the patch centre's column and row (one turn
 * across the image). Plain float64 arithmetic, rounded to float32 on output.
 */
export class PatchDenoiser {
  private readonly P: number;

  constructor(
    readonly patch: number,
    readonly hidden: number,
    readonly textDim: number,
    private readonly w: ToyTensors,
  ) {
    this.P = 3 * patch * patch;
  }

  /** Velocity `out` `[3, height, width]` of the image `x` `[3, height, width]` at noise level `sigma`, conditioned on `text` `[textDim]`. */
  forward(x: Float32Array, width: number, height: number, sigma: number, text: Float32Array, out: Float32Array): void {
    const { patch: p, hidden: H, P, textDim: D } = this;
    const { w_in, b_in, w_text, w_time, w_pos, w_out, b_out } = this.w;
    // The text and time terms are the same for every patch.
    const tau: number[] = [];
    for (let k = 1; k <= TIME_FEATURES / 2; k++) tau.push(Math.sin(k * Math.PI * sigma), Math.cos(k * Math.PI * sigma));
    const base = new Float64Array(H);
    for (let k = 0; k < H; k++) {
      let s = b_in[k];
      for (let j = 0; j < D; j++) s += w_text[k * D + j] * text[j];
      for (let f = 0; f < TIME_FEATURES; f++) s += w_time[k * TIME_FEATURES + f] * tau[f];
      base[k] = s;
    }
    const cols = width / p;
    const rows = height / p;
    const plane = width * height;
    const a = new Float64Array(P);
    const h = new Float64Array(H);
    for (let py = 0; py < rows; py++) {
      for (let px = 0; px < cols; px++) {
        const u = (2 * Math.PI * (px + 0.5)) / cols;
        const v = (2 * Math.PI * (py + 0.5)) / rows;
        const pos = [Math.sin(u), Math.cos(u), Math.sin(v), Math.cos(v)];
        for (let c = 0; c < 3; c++)
          for (let dy = 0; dy < p; dy++) for (let dx = 0; dx < p; dx++) a[(c * p + dy) * p + dx] = x[c * plane + (py * p + dy) * width + px * p + dx];
        for (let k = 0; k < H; k++) {
          let s = base[k];
          for (let i = 0; i < P; i++) s += w_in[k * P + i] * a[i];
          for (let q = 0; q < POSITION_FEATURES; q++) s += w_pos[k * POSITION_FEATURES + q] * pos[q];
          h[k] = s / (1 + Math.exp(-s));
        }
        for (let c = 0; c < 3; c++) {
          for (let dy = 0; dy < p; dy++) {
            for (let dx = 0; dx < p; dx++) {
              const i = (c * p + dy) * p + dx;
              let s = b_out[i];
              for (let k = 0; k < H; k++) s += w_out[i * H + k] * h[k];
              out[c * plane + (py * p + dy) * width + px * p + dx] = s;
            }
          }
        }
      }
    }
  }
}

/** The decoder: a learned colour transform of the denoised image, squashed to [0, 255]: rgb = 127.5·(tanh(C·x + b) + 1). */
export class ColorDecoder {
  constructor(private readonly w: ToyTensors) {}

  /** RGB24 pixels `[height, width, 3]` of the image `x` `[3, height, width]`. */
  render(x: Float32Array, width: number, height: number): Uint8Array<ArrayBuffer> {
    const { color, bias } = this.w;
    const plane = width * height;
    const out = new Uint8Array(plane * 3);
    for (let i = 0; i < plane; i++) {
      for (let o = 0; o < 3; o++) {
        const s = bias[o] + color[o * 3] * x[i] + color[o * 3 + 1] * x[plane + i] + color[o * 3 + 2] * x[2 * plane + i];
        out[i * 3 + o] = Math.min(255, Math.max(0, Math.round(127.5 * (Math.tanh(s) + 1))));
      }
    }
    return out;
  }
}

/**
 * A loaded toy-image model: only the components a deployment (or a stage) asked for are read; asking for another is an
 * error. Everything lives in JS memory, so `weightBytes` counts the float32 elements read and `dispose` drops them.
 */
export class ToyImageModel implements LoadedModel {
  private constructor(
    readonly spec: ToySpec,
    private readonly parts: { embedder?: HashedBagOfWords; denoiser?: PatchDenoiser; decoder?: ColorDecoder },
    readonly weightBytes: Readonly<Record<string, number>>,
  ) {}

  /**
   * Reads `components` of the model in `dir` from their `.toyw` files.
   * @throws OmniError OMNIRX_ERR_MODEL_LOAD naming the file for a missing or mismatched weights file.
   */
  static async load(dir: string, spec: ToySpec, components: ReadonlySet<string>): Promise<ToyImageModel> {
    const expected = componentTensors(spec);
    const bytes: Record<string, number> = {};
    const read = async (c: ToyComponent) => {
      const t = await readToyWeights(path.join(dir, `${c}.toyw`), c, expected[c]);
      bytes[c] = Object.values(t).reduce((n, a) => n + a.byteLength, 0);
      return t;
    };
    const want = (c: ToyComponent) => components.has(c);
    const parts: ToyImageModel['parts'] = {};
    if (want('embedder')) parts.embedder = new HashedBagOfWords(spec.embedder.buckets, spec.embedder.dim, (await read('embedder')).table);
    if (want('denoiser')) parts.denoiser = new PatchDenoiser(spec.denoiser.patch, spec.denoiser.hidden, spec.embedder.dim, await read('denoiser'));
    if (want('decoder')) parts.decoder = new ColorDecoder(await read('decoder'));
    return new ToyImageModel(spec, parts, bytes);
  }

  private missing(name: ToyComponent): never {
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `model '${this.spec.id}': component '${name}' is not loaded here`);
  }

  get embedder(): HashedBagOfWords {
    return this.parts.embedder ?? this.missing('embedder');
  }

  get denoiser(): PatchDenoiser {
    return this.parts.denoiser ?? this.missing('denoiser');
  }

  get decoder(): ColorDecoder {
    return this.parts.decoder ?? this.missing('decoder');
  }

  get loadedComponents(): readonly string[] {
    return TOY_COMPONENTS.filter((c) => this.parts[c] !== undefined);
  }

  dispose(): void {
    this.parts.embedder = this.parts.denoiser = this.parts.decoder = undefined;
  }
}
