// Kernel entry points used by the op table (ops.cc). Layouts are row-major; shapes are given in the comments.
// Every kernel parallelises over the shared compute pool and runs serially when nested in a parallel region.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/gemm.h"

namespace omnirx {

// Scaled dot-product attention per (batch, head):
//   out[b, i, h, :] = softmax_j(scale · q[b, i, h, :] · k[b, j, h, :] + bias[b|0, h, i, j]) · v[b, j, h, :]
// q: [B, Lq, H·D] with row stride ldq (≥ H·D), k: [B, Lk, H·D] (ldk), v: [B, Lk, H·D] (ldv), out: [B, Lq, H·D].
// bias (optional): [Bb, H, Lq, Lk] with Bb ∈ {1, B}. A row whose keys are all −inf yields zeros.
struct AttentionArgs {
  int B = 0, H = 0, D = 0, Lq = 0, Lk = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  int ldq = 0, ldk = 0, ldv = 0, ldo = 0;
  float scale = 1.f;
  const float* bias = nullptr;
  bool bias_per_batch = false;
  // Q·Kᵀ and P·V on the bf16 GEMM path (Q, K, V and the softmax probabilities P rounded to bf16, float32
  // accumulation); the softmax itself stays float32.
  bool bf16 = false;
};
void Attention(const AttentionArgs& a);

// LayerNorm over the last dim N of x [M, N] (Ba et al. 2016): (x − mean) / sqrt(var + eps) · w + b; w, b optional.
void LayerNorm(const float* x, float* y, int64_t M, int64_t N, const float* w, const float* b, float eps);

// RMSNorm over the last dim (Zhang & Sennrich 2019; T5 LayerNorm, Wan WanRMSNorm): x · rsqrt(mean(x²) + eps) · w.
// With l2 = true: x / max(‖x‖₂, eps) · sqrt(N) · w + b (Wan VAE's RMS_norm, F.normalize form).
void RmsNorm(const float* x, float* y, int64_t M, int64_t N, const float* w, const float* b, float eps, bool l2);

// y = act(x) elementwise over n floats (y may equal x).
void Unary(const float* x, float* y, int64_t n, Activation act);

// y[i] = a[i] + b[i mod nb] (b broadcast over rows when nb divides n).
void Add(const float* a, const float* b, float* y, int64_t n, int64_t nb);

// y[i] = a[i] · b[i mod nb] (b broadcast over rows when nb divides n).
void Mul(const float* a, const float* b, float* y, int64_t n, int64_t nb);

// y[i] = a[i] · s (scalar scale).
void Scale(const float* a, float* y, int64_t n, float s);

// Modulation operands of adaLN (Peebles & Xie 2023, DiT; Wan 2.1 `scale_shift_table + temb`): for tokens x [B, L, N]
// grouped into G groups of L/G tokens (G = 1, or one group per frame for per-frame timesteps), chunk k of the
// modulation for token l of batch b in group g = l / (L/G) is  m_k = e[b, g, k or 0] + table[k]  where
// e is [B, G, Ke, N] with Ke ∈ {1, K} (Ke = 1 broadcasts one vector over every chunk) and table [K, N] is optional.
struct Modulation {
  int B = 0, L = 0, N = 0, G = 1, K = 1, Ke = 1;
  const float* e = nullptr;
  const float* table = nullptr;
};

// y = x · (1 + m_scale) + m_shift.
void Modulate(const float* x, float* y, const Modulation& m, int shift_idx, int scale_idx);

// Gated residual: y = x + r · m_gate; with m.e == null (no gate) y = x + r.
void GatedAdd(const float* x, const float* r, float* y, const Modulation& m, int gate_idx);

// Rotary position embedding on interleaved pairs (RoFormer, Su et al. 2021; Wan rope_apply):
// x [B, L, H, D], cos/sin [L, D/2]: (x₂ᵢ, x₂ᵢ₊₁) ↦ (x₂ᵢ·c − x₂ᵢ₊₁·s, x₂ᵢ·s + x₂ᵢ₊₁·c).
void Rope(const float* x, const float* cos, const float* sin, float* y, int B, int L, int H, int D);

// Row gather: y[i, :] = table[ids[i], :] for ids stored as float32 integers; returns an error message for an id
// outside [0, V) or not an integer, else "".
std::string Embedding(const float* ids, const float* table, float* y, int64_t L, int64_t V, int64_t N);

// Generic permutation of up to 8 dims: y[idx permuted] = x[idx]; dims are x's dims, perm gives for each output
// axis the input axis.
void Permute(const float* x, float* y, const int64_t* dims, const int* perm, int rank);

// Nearest-neighbour 2× spatial upsample, channels-last: x [F, H, W, C] → y [F, 2H, 2W, C].
void UpsampleNearest2x(const float* x, float* y, int64_t F, int64_t H, int64_t W, int64_t C);

// Causal 3D convolution, stride 1, channels-last: x [F, H, W, Ci] → y [F, H, W, Co], kernel (kt, kh, kw) with
// spatial zero padding (kh−1)/2, (kw−1)/2 and kt−1 frames of causal history before frame 0 (zeros when history is
// null, else history [kt−1, H, W, Ci]), as Wan's CausalConv3d. Weights packed from [Co, Ci, kt, kh, kw].
// im2col is the caller-provided scratch of H·W·Ci·kt·kh·kw floats.
struct Conv3dArgs {
  int64_t F = 0, H = 0, W = 0, Ci = 0, Co = 0;
  int kt = 1, kh = 1, kw = 1;
  const float* x = nullptr;
  const float* history = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
};
// Causal conv3d, channels-last: y [F, H, W, Co] = conv(x [F, H, W, Ci]) with kt − 1 frames of history (or zeros)
// before the first frame and zero spatial padding (kh − 1)/2, (kw − 1)/2. `w` must come from PackConvWeight.
// im2col + GEMM per pixel tile (per thread, cache-sized), parallel over the compute pool.
void Conv3dCausal(const Conv3dArgs& a, const PackedB& w);
// Packs a conv weight [Co, Ci, kt, kh, kw] for Conv3dCausal (features reordered to (kt, kh, kw, Ci)).
std::shared_ptr<PackedB> PackConvWeight(const float* w, int64_t Co, int64_t Ci, int kt, int kh, int kw);

}  // namespace omnirx
