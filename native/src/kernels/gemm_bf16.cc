// The bf16 GEMM path: B (a linear's weight, packed once; or attention's K and V, packed per call) as bf16 pairs, A
// rounded to bf16 while it is packed, and products accumulated in float32 with the AVX512_BF16 dot-product
// instruction (VDPBF16PS: per 32-bit lane, acc += a[2i+1]·b[2i+1], then acc += a[2i]·b[2i]; Intel SDM,
// "VDPBF16PS"). Products of two bf16 values are exact in float32, so the only rounding beyond float32 GEMM is of the
// operands themselves (relative error ≤ 2⁻⁸ each: bf16 keeps 8 significant bits). Where the instruction is missing
// the same arithmetic runs in plain float32 (same results up to the instruction's flush of denormals to zero;
// Bf16KernelSelfCheck compares the two micro-kernels bit for bit where the instruction exists).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/gemm.h"
#include "simd.h"
#include "storage.h"

namespace omnirx {

namespace {

constexpr int kMR = 12;
constexpr int kNR = kGemmNR;  // two 16-lane vectors, as the float32 path
constexpr int kKC2 = 192;     // k pairs per A block (384 k)

// float32 → bf16, round to nearest even (NaN kept a quiet NaN).
inline uint16_t ToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float FromBf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

inline uint32_t Pair(float lo, float hi) { return static_cast<uint32_t>(ToBf16(lo)) | (static_cast<uint32_t>(ToBf16(hi)) << 16); }

// Packs rows [i0, i0+mc) × k pairs [kp0, kp0+kpc) of A into kMR-row panels: word (kp·kMR + r) holds
// (A[r][2kp], A[r][2kp+1]) as bf16, zero past K and past the last row.
void PackAPairs(const float* A, int lda, int K, int i0, int mc, int kp0, int kpc, uint32_t* out) {
  for (int ip = 0; ip < mc; ip += kMR) {
    const int mi = std::min(kMR, mc - ip);
    uint32_t* dst = out + static_cast<size_t>(ip) * kpc;
    for (int r = 0; r < mi; ++r) {
      const float* src = A + static_cast<size_t>(i0 + ip + r) * lda;
      int kp = 0;
#if defined(__AVX512BF16__)
      // 32 floats → 16 pairs at once (VCVTNE2PS2BF16 rounds to nearest even as ToBf16 does, but flushes denormals to
      // zero, which VDPBF16PS would do to them anyway).
      alignas(64) uint32_t words[16];
      for (; kp + 16 <= kpc && 2 * (kp0 + kp) + 32 <= K; kp += 16) {
        const float* s = src + 2 * (kp0 + kp);
        _mm512_store_si512(words, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(s + 16), _mm512_loadu_ps(s)));
        for (int i = 0; i < 16; ++i) dst[(kp + i) * kMR + r] = words[i];
      }
#endif
      for (; kp < kpc; ++kp) {
        const int k = 2 * (kp0 + kp);
        dst[kp * kMR + r] = Pair(src[k], k + 1 < K ? src[k + 1] : 0.f);
      }
    }
    for (int r = mi; r < kMR; ++r)
      for (int kp = 0; kp < kpc; ++kp) dst[kp * kMR + r] = 0u;
  }
}

// acc[kMR][kNR] = Σ_kp dot(a pair, b pair); then C = alpha·acc (+ C). Plain float32 arithmetic in the instruction's
// order (per lane: the odd pair's product, then the even pair's; a product of two bf16 values is exact in float32, so
// a fused or separate multiply-add gives the same bits); the scale and the add of C are one fused multiply-add in
// both forms, so the compiler's contraction choices cannot make them differ. Always compiled: it is the kernel where the instruction is
// missing, and where it is present, the reference Bf16KernelSelfCheck compares the instruction against.
void MicroKernelBf16Emulated(int kpc, const uint32_t* a, const uint32_t* b, float* c, int ldc, float alpha, bool accumulate) {
  float acc[kMR][kNR] = {};
  for (int kp = 0; kp < kpc; ++kp)
    for (int i = 0; i < kMR; ++i) {
      const uint32_t ap = a[kp * kMR + i];
      const float a0 = FromBf16(static_cast<uint16_t>(ap)), a1 = FromBf16(static_cast<uint16_t>(ap >> 16));
      for (int j = 0; j < kNR; ++j) {
        const uint32_t bp = b[kp * kNR + j];
        acc[i][j] += a1 * FromBf16(static_cast<uint16_t>(bp >> 16));
        acc[i][j] += a0 * FromBf16(static_cast<uint16_t>(bp));
      }
    }
  for (int i = 0; i < kMR; ++i)
    for (int j = 0; j < kNR; ++j) {
      float* cij = c + static_cast<size_t>(i) * ldc + j;
      *cij = accumulate ? std::fma(alpha, acc[i][j], *cij) : alpha * acc[i][j];
    }
}

#if defined(__AVX512BF16__)
// The same with VDPBF16PS (two 16-lane accumulators per row).
void MicroKernelBf16Native(int kpc, const uint32_t* a, const uint32_t* b, float* c, int ldc, float alpha, bool accumulate) {
  __m512 acc[kMR][2];
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int kp = 0; kp < kpc; ++kp) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b + kp * kNR);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + kp * kNR + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[kp * kMR + i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  const v16 va = Splat(alpha);
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    float* ci = c + static_cast<size_t>(i) * ldc;
    const v16 r0 = accumulate ? (v16)_mm512_fmadd_ps(acc[i][0], (__m512)va, (__m512)Load(ci)) : (v16)acc[i][0] * va;
    const v16 r1 = accumulate ? (v16)_mm512_fmadd_ps(acc[i][1], (__m512)va, (__m512)Load(ci + 16)) : (v16)acc[i][1] * va;
    Store(ci, r0);
    Store(ci + 16, r1);
  }
}
#endif

inline void MicroKernelBf16(int kpc, const uint32_t* a, const uint32_t* b, float* c, int ldc, float alpha, bool accumulate) {
#if defined(__AVX512BF16__)
  MicroKernelBf16Native(kpc, a, b, c, ldc, alpha, accumulate);
#else
  MicroKernelBf16Emulated(kpc, a, b, c, ldc, alpha, accumulate);
#endif
}

thread_local ScratchBuffer tl_apack_bf16;

// B as bf16 pair panels (layout in gemm.h, PackBBf16), from B [N, K] (kNK) or [K, N] (kKN) with row stride ldb.
void PackPanelsBf16(const float* B, int N, int K, int ldb, BLayout layout, uint32_t* out) {
  const int panels = (N + kNR - 1) / kNR;
  const int K2 = (K + 1) / 2;
  const auto at = [&](int j, int k) -> float {
    if (k >= K) return 0.f;
    return layout == BLayout::kNK ? B[static_cast<size_t>(j) * ldb + k] : B[static_cast<size_t>(k) * ldb + j];
  };
  for (int q = 0; q < panels; ++q) {
    const int j0 = q * kNR;
    const int nj = std::min(kNR, N - j0);
    uint32_t* dst = out + static_cast<size_t>(q) * K2 * kNR;
    for (int kp = 0; kp < K2; ++kp)
      for (int j = 0; j < kNR; ++j) dst[kp * kNR + j] = j < nj ? Pair(at(j0 + j, 2 * kp), at(j0 + j, 2 * kp + 1)) : 0u;
  }
}

}  // namespace

Bf16SelfCheck Bf16KernelSelfCheck() {
  Bf16SelfCheck r;
#if defined(__AVX512BF16__)
  // Operands over many binades (|x| from 2⁻²⁰ to 2²⁰, both signs, exact zeros), so a wrong pair order, a dropped
  // half or a different rounding of the accumulator shows; no denormals (the instruction flushes them, the emulation
  // does not: the one documented difference). A fixed linear congruential sequence: the same operands every run.
  uint32_t state = 12345u;
  const auto next = [&state]() {
    state = state * 1664525u + 1013904223u;
    return state;
  };
  const auto value = [&]() -> float {
    const uint32_t u = next();
    if ((u & 15u) == 0) return 0.f;
    const float mant = 1.f + static_cast<float>((u >> 8) & 0xffffu) / 65536.f;
    const int exp = static_cast<int>((u >> 4) % 41u) - 20;
    return ((u & 1u) ? -mant : mant) * std::ldexp(1.f, exp);
  };
  const auto pair = [&]() { return Pair(value(), value()); };
  constexpr int kMaxPairs = kKC2;
  // Panels as the kernel reads them (64-byte aligned, as the packed panels of a GEMM).
  size_t bytes = 0;
  float* buf = AllocAligned(static_cast<size_t>(kMaxPairs) * (kMR + kNR), &bytes);
  uint32_t* a = reinterpret_cast<uint32_t*>(buf);
  uint32_t* b = a + static_cast<size_t>(kMaxPairs) * kMR;
  for (const int kpc : {1, 2, 7, 64, kMaxPairs}) {
    for (int i = 0; i < kpc * kMR; ++i) a[i] = pair();
    for (int i = 0; i < kpc * kNR; ++i) b[i] = pair();
    for (const bool accumulate : {false, true}) {
      alignas(64) float c_native[kMR * kNR], c_emulated[kMR * kNR];
      for (int i = 0; i < kMR * kNR; ++i) c_native[i] = c_emulated[i] = value();
      MicroKernelBf16Native(kpc, a, b, c_native, kNR, 0.75f, accumulate);
      MicroKernelBf16Emulated(kpc, a, b, c_emulated, kNR, 0.75f, accumulate);
      for (int i = 0; i < kMR * kNR; ++i) {
        r.compared += 1;
        if (std::memcmp(&c_native[i], &c_emulated[i], sizeof(float)) != 0) r.mismatches += 1;
      }
    }
  }
  FreeAligned(buf, bytes);
#endif
  return r;
}

bool Bf16Native() {
#if defined(__AVX512BF16__)
  return true;
#else
  return false;
#endif
}

// One 32-bit word per (k pair, column) in panels of kNR columns.
size_t PackedSizeBf16(int N, int K) { return static_cast<size_t>((N + kNR - 1) / kNR) * static_cast<size_t>((K + 1) / 2) * kNR; }

std::shared_ptr<PackedB> PackBBf16(const float* B, int N, int K, int ldb) {
  auto p = std::make_shared<PackedB>();
  p->N = N;
  p->K = K;
  p->bf16 = true;
  p->data = AllocAligned(PackedSizeBf16(N, K), &p->bytes);
  PackPanelsBf16(B, N, K, ldb, BLayout::kNK, reinterpret_cast<uint32_t*>(p->data));
  return p;
}

PackedB PackBBf16Into(const float* B, int N, int K, int ldb, BLayout layout, float* out) {
  PackPanelsBf16(B, N, K, ldb, layout, reinterpret_cast<uint32_t*>(out));
  PackedB view;
  view.N = N;
  view.K = K;
  view.bf16 = true;
  view.data = out;  // non-owning: the caller clears it before the view dies
  return view;
}

void GemmBlockBf16(const GemmArgs& g, const PackedB& B, int i0, int mc, int p0, int p1) {
  const int K2 = (g.K + 1) / 2;
  uint32_t* apack = reinterpret_cast<uint32_t*>(tl_apack_bf16.Get(static_cast<size_t>(mc + kMR) * kKC2));
  const uint32_t* bdata = reinterpret_cast<const uint32_t*>(B.data);
  for (int kp0 = 0; kp0 < K2; kp0 += kKC2) {
    const int kpc = std::min(kKC2, K2 - kp0);
    PackAPairs(g.A, g.lda, g.K, i0, mc, kp0, kpc, apack);
    const bool acc = g.accumulate || kp0 > 0;
    for (int p = p0; p < p1; ++p) {
      const int j0 = p * kNR;
      const int nj = std::min(kNR, g.N - j0);
      const uint32_t* bp = bdata + (static_cast<size_t>(p) * K2 + kp0) * kNR;
      for (int ip = 0; ip < mc; ip += kMR) {
        const int mi = std::min(kMR, mc - ip);
        float* c = g.C + static_cast<size_t>(i0 + ip) * g.ldc + j0;
        const uint32_t* ap = apack + static_cast<size_t>(ip) * kpc;
        if (mi == kMR && nj == kNR) {
          MicroKernelBf16(kpc, ap, bp, c, g.ldc, g.alpha, acc);
        } else {
          alignas(64) float tile[kMR * kNR];
          MicroKernelBf16(kpc, ap, bp, tile, kNR, g.alpha, false);
          for (int i = 0; i < mi; ++i)
            for (int j = 0; j < nj; ++j) {
              float* cij = c + static_cast<size_t>(i) * g.ldc + j;
              *cij = acc ? *cij + tile[i * kNR + j] : tile[i * kNR + j];
            }
        }
      }
    }
  }
}

}  // namespace omnirx
