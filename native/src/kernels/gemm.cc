#include "kernels/gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "simd.h"
#include "storage.h"
#include "thread_pool.h"

namespace omnirx {

namespace {

constexpr int kMR = 12;
constexpr int kNR = kGemmNR;
constexpr int kKC = 256;
constexpr int kMC = 96;      // rows per A block for large M (multiple of kMR)
constexpr int kMCMax = 192;  // largest A block, used when M is small

PackedB* NewPacked(int N, int K) {
  auto* p = new PackedB();
  p->N = N;
  p->K = K;
  size_t panels = static_cast<size_t>((N + kNR - 1) / kNR);
  p->data = AllocAligned(panels * static_cast<size_t>(K) * kNR, &p->bytes);
  return p;
}

void PackPanels(const float* B, int N, int K, int ldb, BLayout layout, float* out) {
  const int panels = (N + kNR - 1) / kNR;
  for (int p = 0; p < panels; ++p) {
    const int j0 = p * kNR;
    const int nj = std::min(kNR, N - j0);
    float* dst = out + static_cast<size_t>(p) * K * kNR;
    if (layout == BLayout::kKN) {
      for (int k = 0; k < K; ++k) {
        const float* src = B + static_cast<size_t>(k) * ldb + j0;
        float* d = dst + static_cast<size_t>(k) * kNR;
        std::memcpy(d, src, sizeof(float) * nj);
        for (int j = nj; j < kNR; ++j) d[j] = 0.f;
      }
    } else {
      for (int k = 0; k < K; ++k) {
        float* d = dst + static_cast<size_t>(k) * kNR;
        for (int j = 0; j < nj; ++j) d[j] = B[static_cast<size_t>(j0 + j) * ldb + k];
        for (int j = nj; j < kNR; ++j) d[j] = 0.f;
      }
    }
  }
}

// Packs rows [i0, i0+mc) × cols [k0, k0+kc) of A into kMR-row panels, k-major, zero-padded.
void PackA(const float* A, int lda, int i0, int mc, int k0, int kc, float* out) {
  for (int ip = 0; ip < mc; ip += kMR) {
    const int mi = std::min(kMR, mc - ip);
    float* dst = out + static_cast<size_t>(ip) * kc;
    for (int r = 0; r < mi; ++r) {
      const float* src = A + static_cast<size_t>(i0 + ip + r) * lda + k0;
      for (int k = 0; k < kc; ++k) dst[k * kMR + r] = src[k];
    }
    for (int r = mi; r < kMR; ++r)
      for (int k = 0; k < kc; ++k) dst[k * kMR + r] = 0.f;
  }
}

// The micro-kernel: acc[kMR][kNR] = Σ_k a[i][k] · b[k][j]; then C = alpha·acc (+ C). A is either packed
// (kPacked: a[k·kMR + i]) or read in place from row-major rows (a[i·lda + k]) when packing would cost as much as
// the product (few column panels). The arithmetic, and so every bit of the result, is the same either way.
template <bool kPacked>
inline void MicroKernelT(int kc, const float* a, int lda, const float* b, float* c, int ldc, float alpha, bool accumulate) {
  v16 acc[kMR][2];
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = v16{};
  for (int k = 0; k < kc; ++k) {
    const v16 b0 = Load(b + k * kNR);
    const v16 b1 = Load(b + k * kNR + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      const v16 ai = Splat(kPacked ? a[k * kMR + i] : a[static_cast<size_t>(i) * lda + k]);
      acc[i][0] += ai * b0;
      acc[i][1] += ai * b1;
    }
  }
  const v16 va = Splat(alpha);
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    float* ci = c + static_cast<size_t>(i) * ldc;
    v16 r0 = acc[i][0] * va, r1 = acc[i][1] * va;
    if (accumulate) {
      r0 += Load(ci);
      r1 += Load(ci + 16);
    }
    Store(ci, r0);
    Store(ci + 16, r1);
  }
}

inline void MicroKernel(int kc, const float* a, const float* b, float* c, int ldc, float alpha, bool accumulate) {
  MicroKernelT<true>(kc, a, kMR, b, c, ldc, alpha, accumulate);
}

// A tile at the right or bottom edge: compute into a full local tile, then copy the valid part.
inline void EdgeKernel(int kc, const float* a, const float* b, float* c, int ldc, int mi, int nj, float alpha,
                       bool accumulate) {
  alignas(64) float tile[kMR * kNR];
  MicroKernel(kc, a, b, tile, kNR, alpha, false);
  for (int i = 0; i < mi; ++i)
    for (int j = 0; j < nj; ++j) {
      float v = tile[i * kNR + j];
      c[static_cast<size_t>(i) * ldc + j] = accumulate ? c[static_cast<size_t>(i) * ldc + j] + v : v;
    }
}

thread_local ScratchBuffer tl_apack;
thread_local ScratchBuffer tl_bpack;

void GemmBlockF32(const GemmArgs& g, const PackedB& B, int i0, int mc, int p0, int p1);
void Epilogue(const GemmArgs& g, int i0, int mc, int p0, int p1);

// A block of C with its epilogue, on the path B was packed for.
void GemmBlock(const GemmArgs& g, const PackedB& B, int i0, int mc, int p0, int p1) {
  if (B.bf16)
    GemmBlockBf16(g, B, i0, mc, p0, p1);
  else
    GemmBlockF32(g, B, i0, mc, p0, p1);
  Epilogue(g, i0, mc, p0, p1);
}

// Computes rows [i0, i0+mc) × panels [p0, p1) of C over the whole K (no epilogue).
void GemmBlockF32(const GemmArgs& g, const PackedB& B, int i0, int mc, int p0, int p1) {
  float* apack = tl_apack.Get(static_cast<size_t>(kMCMax + kMR) * kKC);
  // Packing A pays off when each packed panel feeds many column panels; with few (attention's P·V: N = head dim)
  // the micro-kernel reads A in place. Decided by N alone, so a row's bits never depend on M or on batching.
  const bool pack_a = (g.N + kNR - 1) / kNR > 4;
  for (int k0 = 0; k0 < g.K; k0 += kKC) {
    const int kc = std::min(kKC, g.K - k0);
    const int full = pack_a ? mc : mc / kMR * kMR;  // rows read in place must form whole kMR tiles
    if (pack_a) {
      PackA(g.A, g.lda, i0, mc, k0, kc, apack);
    } else if (full < mc) {
      PackA(g.A, g.lda, i0 + full, mc - full, k0, kc, apack + static_cast<size_t>(full) * kc);
    }
    const bool acc = g.accumulate || k0 > 0;
    for (int p = p0; p < p1; ++p) {
      const int j0 = p * kNR;
      const int nj = std::min(kNR, g.N - j0);
      const float* bp = B.data + (static_cast<size_t>(p) * g.K + k0) * kNR;
      for (int ip = 0; ip < mc; ip += kMR) {
        const int mi = std::min(kMR, mc - ip);
        float* c = g.C + static_cast<size_t>(i0 + ip) * g.ldc + j0;
        const float* ap = apack + static_cast<size_t>(ip) * kc;
        if (mi == kMR && nj == kNR) {
          if (pack_a || ip + kMR <= full)
            pack_a ? MicroKernel(kc, ap, bp, c, g.ldc, g.alpha, acc)
                   : MicroKernelT<false>(kc, g.A + static_cast<size_t>(i0 + ip) * g.lda + k0, g.lda, bp, c, g.ldc, g.alpha, acc);
          else
            MicroKernel(kc, ap, bp, c, g.ldc, g.alpha, acc);
        } else if (!pack_a && ip + kMR <= full) {
          // A full row tile at the right edge, A read in place: pack just this tile.
          PackA(g.A, g.lda, i0 + ip, kMR, k0, kc, apack + static_cast<size_t>(ip) * kc);
          EdgeKernel(kc, ap, bp, c, g.ldc, mi, nj, g.alpha, acc);
        } else {
          EdgeKernel(kc, ap, bp, c, g.ldc, mi, nj, g.alpha, acc);
        }
      }
    }
  }
}

// Zeroes the block when K = 0, then adds bias and applies the activation: the epilogue of either path.
void Epilogue(const GemmArgs& g, int i0, int mc, int p0, int p1) {
  if (g.K == 0 && !g.accumulate) {
    for (int i = i0; i < i0 + mc; ++i)
      for (int j = p0 * kNR; j < std::min(g.N, p1 * kNR); ++j) g.C[static_cast<size_t>(i) * g.ldc + j] = 0.f;
  }
  if (g.bias != nullptr || g.act != Activation::kNone) {
    const int j0 = p0 * kNR;
    const int j1 = std::min(g.N, p1 * kNR);
    for (int i = i0; i < i0 + mc; ++i) {
      float* row = g.C + static_cast<size_t>(i) * g.ldc;
      if (g.bias != nullptr)
        for (int j = j0; j < j1; ++j) row[j] += g.bias[j];
      if (g.act != Activation::kNone) ApplyActivation(row + j0, static_cast<size_t>(j1 - j0), g.act);
    }
  }
}

}  // namespace

PackedB::~PackedB() { FreeAligned(data, bytes); }

std::shared_ptr<PackedB> PackB(const float* B, int N, int K, int ldb, BLayout layout) {
  std::shared_ptr<PackedB> p(NewPacked(N, K));
  PackPanels(B, N, K, ldb, layout, p->data);
  return p;
}

void Gemm(const GemmArgs& g, const PackedB& B) {
  if (g.M == 0 || g.N == 0) return;
  const int panels = (g.N + kNR - 1) / kNR;
  const int threads = ComputePool().threads();
  // Row blocks: kMC rows for large M; when M is small, one block per thread (each thread packs its A once and
  // the work is balanced), up to kMCMax rows. The block size never changes a row's arithmetic.
  const int per_thread = (g.M + threads - 1) / threads;
  const int block = per_thread <= kMCMax ? std::max(kMR, (per_thread + kMR - 1) / kMR * kMR) : kMC;
  const int mblocks = (g.M + block - 1) / block;
  // Split N only when there are fewer row blocks than threads.
  int nchunks = 1;
  while (mblocks * nchunks < threads && nchunks < panels) ++nchunks;
  const int per = (panels + nchunks - 1) / nchunks;
  nchunks = (panels + per - 1) / per;
  ComputePool().ParallelFor(static_cast<size_t>(mblocks) * nchunks, [&](size_t item, int) {
    const int mb = static_cast<int>(item) / nchunks;
    const int nc = static_cast<int>(item) % nchunks;
    const int i0 = mb * block;
    const int mc = std::min(block, g.M - i0);
    const int p0 = nc * per;
    const int p1 = std::min(panels, p0 + per);
    GemmBlock(g, B, i0, mc, p0, p1);
  });
}

void GemmSerial(const GemmArgs& g, const float* B, int ldb, BLayout layout) {
  if (g.M == 0 || g.N == 0) return;
  const int panels = (g.N + kNR - 1) / kNR;
  PackedB view;
  view.N = g.N;
  view.K = g.K;
  view.data = tl_bpack.Get(static_cast<size_t>(panels) * g.K * kNR);
  PackPanels(B, g.N, g.K, ldb, layout, view.data);
  for (int i0 = 0; i0 < g.M; i0 += kMC) GemmBlock(g, view, i0, std::min(kMC, g.M - i0), 0, panels);
  view.data = nullptr;  // owned by the scratch, not by the view
}

void GemmSerialPacked(const GemmArgs& g, const PackedB& B) {
  if (g.M == 0 || g.N == 0) return;
  const int panels = (g.N + kNR - 1) / kNR;
  for (int i0 = 0; i0 < g.M; i0 += kMC) GemmBlock(g, B, i0, std::min(kMC, g.M - i0), 0, panels);
}

size_t PackedSize(int N, int K) { return static_cast<size_t>((N + kNR - 1) / kNR) * static_cast<size_t>(K) * kNR; }

PackedB PackBInto(const float* B, int N, int K, int ldb, BLayout layout, float* out) {
  PackPanels(B, N, K, ldb, layout, out);
  PackedB view;
  view.N = N;
  view.K = K;
  view.data = out;  // non-owning: the caller clears it before the view dies
  return view;
}

void ApplyActivation(float* x, size_t n, Activation act) {
  size_t i = 0;
  if (act == Activation::kGeluTanh) {
    // GELU, tanh approximation (Hendrycks & Gimpel 2016; torch.nn.functional.gelu(approximate="tanh")).
    const v16 k0 = Splat(0.7978845608028654f), k1 = Splat(0.044715f), half = Splat(0.5f), one = Splat(1.f);
    for (; i + 16 <= n; i += 16) {
      v16 v = Load(x + i);
      Store(x + i, half * v * (one + Tanh(k0 * (v + k1 * v * v * v))));
    }
    for (; i < n; ++i) {
      float v = x[i];
      x[i] = 0.5f * v * (1.f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
  } else if (act == Activation::kSilu) {
    const v16 one = Splat(1.f);
    for (; i + 16 <= n; i += 16) {
      v16 v = Load(x + i);
      Store(x + i, v / (one + Exp(-v)));
    }
    for (; i < n; ++i) x[i] = x[i] / (1.f + std::exp(-x[i]));
  }
}

}  // namespace omnirx
