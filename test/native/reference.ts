/**
 * Float64 reference implementations of the native ops, one plain function per op, each a direct transcription of
 * the formula in the comment of native/src/kernels/kernels.h (and gemm.h for the activations). They never call
 * the addon. Inputs are the float32 values actually handed to the kernel (so input rounding is not counted as
 * kernel error); every intermediate is a JS number (float64); outputs are Float64Array, row-major.
 */

type Vec = ArrayLike<number>;

// ---- activations (gemm.h ApplyActivation) -------------------------------------------------------------------

/** GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). */
export function geluTanhScalar(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
}

/** SiLU: x·σ(x) = x / (1 + e^−x). */
export function siluScalar(x: number): number {
  return x / (1 + Math.exp(-x));
}

export type RefActivation = 'none' | 'gelu_tanh' | 'silu';

function activate(v: number, act: RefActivation): number {
  return act === 'gelu_tanh' ? geluTanhScalar(v) : act === 'silu' ? siluScalar(v) : v;
}

export function geluTanh(x: Vec): Float64Array {
  return Float64Array.from(x, geluTanhScalar);
}

export function silu(x: Vec): Float64Array {
  return Float64Array.from(x, siluScalar);
}

// ---- linear ------------------------------------------------------------------------------------------------

/**
 * float32 values rounded to bfloat16 (the upper 16 bits, round to nearest even; IEEE/Google brain-float), returned
 * as the float32 values they stand for. Written from the format's definition, apart from the kernel's ToBf16.
 */
export function roundToBf16(x: ArrayLike<number>): Float32Array {
  const f = Float32Array.from(x);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < u.length; i++) {
    const hi = u[i] >>> 16;
    const lo = u[i] & 0xffff;
    let r = hi;
    if (lo > 0x8000 || (lo === 0x8000 && (hi & 1) === 1)) r = hi + 1;
    u[i] = (r << 16) >>> 0;
  }
  return f;
}

/** y[M, N] = act(x[M, K] · w[N, K]ᵀ + b[N]). */
export function linear(x: Vec, w: Vec, b: Vec | undefined, M: number, N: number, K: number, act: RefActivation = 'none'): Float64Array {
  const y = new Float64Array(M * N);
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let s = b === undefined ? 0 : b[j];
      for (let k = 0; k < K; k++) s += x[i * K + k] * w[j * K + k];
      y[i * N + j] = activate(s, act);
    }
  }
  return y;
}

// ---- attention ---------------------------------------------------------------------------------------------

export interface AttentionDims {
  B: number;
  H: number;
  D: number;
  Lq: number;
  Lk: number;
  scale: number;
}

/**
 * out[b, i, h, :] = softmax_j(scale · q[b, i, h, :] · k[b, j, h, :] + bias[b|0, h, i, j]) · v[b, j, h, :], with
 * q [B, Lq, H·D], k/v [B, Lk, H·D], bias [Bb, H, Lq, Lk] (Bb = 1 shared, Bb = B per batch). A row whose logits are
 * all −inf yields zeros; a NaN logit makes the row NaN (IEEE arithmetic does that on its own).
 */
export function attention(q: Vec, k: Vec, v: Vec, d: AttentionDims, bias?: { data: Vec; perBatch: boolean }): Float64Array {
  const { B, H, D, Lq, Lk, scale } = d;
  const HD = H * D;
  const out = new Float64Array(B * Lq * HD);
  const logits = new Float64Array(Lk);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      for (let i = 0; i < Lq; i++) {
        const qo = (b * Lq + i) * HD + h * D;
        let max = -Infinity;
        for (let j = 0; j < Lk; j++) {
          const ko = (b * Lk + j) * HD + h * D;
          let s = 0;
          for (let t = 0; t < D; t++) s += q[qo + t] * k[ko + t];
          s *= scale;
          if (bias !== undefined) s += bias.data[(((bias.perBatch ? b : 0) * H + h) * Lq + i) * Lk + j];
          logits[j] = s;
          max = Math.max(max, s); // NaN-propagating
        }
        const oo = (b * Lq + i) * HD + h * D;
        if (max === -Infinity) continue; // all keys masked: zeros
        let sum = 0;
        for (let j = 0; j < Lk; j++) {
          logits[j] = Math.exp(logits[j] - max);
          sum += logits[j];
        }
        for (let j = 0; j < Lk; j++) {
          const p = logits[j] / sum;
          const vo = (b * Lk + j) * HD + h * D;
          for (let t = 0; t < D; t++) out[oo + t] += p * v[vo + t];
        }
      }
    }
  }
  return out;
}

// ---- norms -------------------------------------------------------------------------------------------------

/** LayerNorm over the last dim N of x [M, N]: (x − mean) / sqrt(var + eps) · w + b (biased variance). */
export function layerNorm(x: Vec, M: number, N: number, eps: number, w?: Vec, b?: Vec): Float64Array {
  const y = new Float64Array(M * N);
  for (let i = 0; i < M; i++) {
    let mean = 0;
    for (let j = 0; j < N; j++) mean += x[i * N + j];
    mean /= N;
    let varc = 0;
    for (let j = 0; j < N; j++) varc += (x[i * N + j] - mean) ** 2;
    varc /= N;
    const rstd = 1 / Math.sqrt(varc + eps);
    for (let j = 0; j < N; j++) {
      let v = (x[i * N + j] - mean) * rstd;
      if (w !== undefined) v *= w[j];
      if (b !== undefined) v += b[j];
      y[i * N + j] = v;
    }
  }
  return y;
}

/**
 * RMSNorm over the last dim: x · rsqrt(mean(x²) + eps) · w (+ b). With l2: x / max(‖x‖₂, eps) · sqrt(N) · w + b.
 */
export function rmsNorm(x: Vec, M: number, N: number, eps: number, l2: boolean, w?: Vec, b?: Vec): Float64Array {
  const y = new Float64Array(M * N);
  for (let i = 0; i < M; i++) {
    let ss = 0;
    for (let j = 0; j < N; j++) ss += x[i * N + j] ** 2;
    const r = l2 ? Math.sqrt(N) / Math.max(Math.sqrt(ss), eps) : 1 / Math.sqrt(ss / N + eps);
    for (let j = 0; j < N; j++) {
      let v = x[i * N + j] * r;
      if (w !== undefined) v *= w[j];
      if (b !== undefined) v += b[j];
      y[i * N + j] = v;
    }
  }
  return y;
}

// ---- elementwise -------------------------------------------------------------------------------------------

/** y[i] = a[i] + b[i mod nb]. */
export function add(a: Vec, b: Vec): Float64Array {
  return Float64Array.from({ length: a.length }, (_, i) => a[i] + b[i % b.length]);
}

/** y[i] = a[i] · b[i mod nb]. */
export function mul(a: Vec, b: Vec): Float64Array {
  return Float64Array.from({ length: a.length }, (_, i) => a[i] * b[i % b.length]);
}

/** y[i] = a[i] · s. */
export function scale(a: Vec, s: number): Float64Array {
  return Float64Array.from(a, (v) => v * s);
}

export interface ModulationDims {
  B: number;
  L: number;
  N: number;
  G: number;
  K: number;
  /** Chunks stored in e: K, or 1 to broadcast one vector over every chunk (default K). */
  Ke?: number;
  /** Optional [K, N] table added to every chunk (Wan's scale_shift_table). */
  table?: Vec;
}

/** Chunk k of the modulation of (b, g): e[b, g, k or 0] + table[k]. */
function modulationAt(e: Vec, d: ModulationDims, b: number, g: number, k: number, n: number): number {
  const Ke = d.Ke ?? d.K;
  const v = e[((b * d.G + g) * Ke + (Ke === 1 ? 0 : k)) * d.N + n];
  return d.table === undefined ? v : v + d.table[k * d.N + n];
}

/** x [B, L, N], token l in group g = ⌊l / (L/G)⌋: y = x · (1 + m[b, g, scale]) + m[b, g, shift]. */
export function modulate(x: Vec, e: Vec, d: ModulationDims, shiftIdx: number, scaleIdx: number): Float64Array {
  const { B, L, N, G } = d;
  const y = new Float64Array(B * L * N);
  for (let b = 0; b < B; b++) {
    for (let l = 0; l < L; l++) {
      const g = Math.floor(l / (L / G));
      for (let n = 0; n < N; n++) {
        const sh = modulationAt(e, d, b, g, shiftIdx, n);
        const sc = modulationAt(e, d, b, g, scaleIdx, n);
        const i = (b * L + l) * N + n;
        y[i] = x[i] * (1 + sc) + sh;
      }
    }
  }
  return y;
}

/** y = x + r · m[b, g, gate] (grouping as in modulate); without e: y = x + r. */
export function gatedAdd(x: Vec, r: Vec, gate?: { e: Vec; dims: ModulationDims; index: number }): Float64Array {
  if (gate === undefined) return Float64Array.from({ length: x.length }, (_, i) => x[i] + r[i]);
  const { B, L, N, G } = gate.dims;
  const y = new Float64Array(B * L * N);
  for (let b = 0; b < B; b++) {
    for (let l = 0; l < L; l++) {
      const g = Math.floor(l / (L / G));
      for (let n = 0; n < N; n++) {
        const i = (b * L + l) * N + n;
        y[i] = x[i] + r[i] * modulationAt(gate.e, gate.dims, b, g, gate.index, n);
      }
    }
  }
  return y;
}

/** x [B, L, H, D], cos/sin [L, D/2]: (x₂ᵢ, x₂ᵢ₊₁) ↦ (x₂ᵢ·c − x₂ᵢ₊₁·s, x₂ᵢ·s + x₂ᵢ₊₁·c). */
export function rope(x: Vec, cos: Vec, sin: Vec, B: number, L: number, H: number, D: number): Float64Array {
  const y = new Float64Array(B * L * H * D);
  const half = D / 2;
  for (let b = 0; b < B; b++) {
    for (let l = 0; l < L; l++) {
      for (let h = 0; h < H; h++) {
        const o = ((b * L + l) * H + h) * D;
        for (let i = 0; i < half; i++) {
          const c = cos[l * half + i];
          const s = sin[l * half + i];
          const a0 = x[o + 2 * i];
          const a1 = x[o + 2 * i + 1];
          y[o + 2 * i] = a0 * c - a1 * s;
          y[o + 2 * i + 1] = a0 * s + a1 * c;
        }
      }
    }
  }
  return y;
}

/** y[i, :] = table[ids[i], :] for table [V, N]. */
export function embedding(ids: Vec, table: Vec, N: number): Float64Array {
  const y = new Float64Array(ids.length * N);
  for (let i = 0; i < ids.length; i++) for (let n = 0; n < N; n++) y[i * N + n] = table[ids[i] * N + n];
  return y;
}

// ---- layout ------------------------------------------------------------------------------------------------

/** x viewed as `dims`; output axis a is input axis perm[a]: y[i₀, …] = x[j] with j[perm[a]] = i[a]. */
export function permute(x: Vec, dims: readonly number[], perm: readonly number[]): Float64Array {
  const rank = dims.length;
  const inStride = new Array<number>(rank);
  let s = 1;
  for (let d = rank - 1; d >= 0; d--) {
    inStride[d] = s;
    s *= dims[d];
  }
  const outDims = perm.map((p) => dims[p]);
  const y = new Float64Array(s);
  const idx = new Array<number>(rank).fill(0);
  for (let o = 0; o < s; o++) {
    let src = 0;
    for (let a = 0; a < rank; a++) src += idx[a] * inStride[perm[a]];
    y[o] = x[src];
    for (let a = rank - 1; a >= 0; a--) {
      if (++idx[a] < outDims[a]) break;
      idx[a] = 0;
    }
  }
  return y;
}

/** Nearest 2× upsample, channels-last: y[f, Y, X, c] = x[f, ⌊Y/2⌋, ⌊X/2⌋, c] for x [F, H, W, C]. */
export function upsampleNearest2x(x: Vec, F: number, H: number, W: number, C: number): Float64Array {
  const y = new Float64Array(F * 4 * H * W * C);
  for (let f = 0; f < F; f++)
    for (let Y = 0; Y < 2 * H; Y++)
      for (let X = 0; X < 2 * W; X++) for (let c = 0; c < C; c++) y[((f * 2 * H + Y) * 2 * W + X) * C + c] = x[((f * H + (Y >> 1)) * W + (X >> 1)) * C + c];
  return y;
}

export interface Conv3dDims {
  F: number;
  H: number;
  W: number;
  Ci: number;
  Co: number;
  kt: number;
  kh: number;
  kw: number;
}

/**
 * Causal 3D convolution, stride 1, channels-last: x [F, H, W, Ci] → y [F, H, W, Co], weight [Co, Ci, kt, kh, kw],
 *   y[f, i, j, o] = b[o] + Σ_{c, dt, dy, dx} w[o, c, dt, dy, dx] · X(f − (kt−1) + dt, i + dy − (kh−1)/2, j + dx − (kw−1)/2, c)
 * where X is x for frames ≥ 0, history[frame + kt − 1] (or zero without history) for the kt−1 frames before 0, and
 * zero outside the spatial extent.
 */
export function conv3dCausal(x: Vec, w: Vec, b: Vec | undefined, history: Vec | undefined, d: Conv3dDims): Float64Array {
  const { F, H, W, Ci, Co, kt, kh, kw } = d;
  const ph = (kh - 1) / 2;
  const pw = (kw - 1) / 2;
  const y = new Float64Array(F * H * W * Co);
  const at = (frame: number, i: number, j: number, c: number): number => {
    if (i < 0 || i >= H || j < 0 || j >= W) return 0;
    if (frame >= 0) return x[((frame * H + i) * W + j) * Ci + c];
    if (history === undefined) return 0;
    return history[(((frame + kt - 1) * H + i) * W + j) * Ci + c];
  };
  for (let f = 0; f < F; f++)
    for (let i = 0; i < H; i++)
      for (let j = 0; j < W; j++)
        for (let o = 0; o < Co; o++) {
          let s = b === undefined ? 0 : b[o];
          for (let c = 0; c < Ci; c++)
            for (let dt = 0; dt < kt; dt++)
              for (let dy = 0; dy < kh; dy++)
                for (let dx = 0; dx < kw; dx++) s += w[(((o * Ci + c) * kt + dt) * kh + dy) * kw + dx] * at(f - (kt - 1) + dt, i + dy - ph, j + dx - pw, c);
          y[((f * H + i) * W + j) * Co + o] = s;
        }
  return y;
}
