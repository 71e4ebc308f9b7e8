#include "kernels/gemm.h"

#include <algorithm>
#include <array>
#include <utility>
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
  p->nr = GemmPanelWidth(N);
  p->data = AllocAligned(PackedSize(N, K), &p->bytes);
  return p;
}

void PackPanels(const float* B, int N, int K, int ldb, BLayout layout, float* out) {
  const int nr = GemmPanelWidth(N);
  const int panels = (N + nr - 1) / nr;
  for (int p = 0; p < panels; ++p) {
    const int j0 = p * nr;
    const int nj = std::min(nr, N - j0);
    float* dst = out + static_cast<size_t>(p) * K * nr;
    if (layout == BLayout::kKN) {
      for (int k = 0; k < K; ++k) {
        const float* src = B + static_cast<size_t>(k) * ldb + j0;
        float* d = dst + static_cast<size_t>(k) * nr;
        std::memcpy(d, src, sizeof(float) * nj);
        for (int j = nj; j < nr; ++j) d[j] = 0.f;
      }
    } else {
      for (int k = 0; k < K; ++k) {
        float* d = dst + static_cast<size_t>(k) * nr;
        for (int j = 0; j < nj; ++j) d[j] = B[static_cast<size_t>(j0 + j) * ldb + k];
        for (int j = nj; j < nr; ++j) d[j] = 0.f;
      }
    }
  }
}

// Packs rows [i0, i0+mc) × cols [k0, k0+kc) of A into kMR-row panels, k-major (a last panel of fewer rows keeps
// the kMR stride; its missing rows are never read).
void PackA(const float* A, int lda, int i0, int mc, int k0, int kc, float* out) {
  for (int ip = 0; ip < mc; ip += kMR) {
    const int mi = std::min(kMR, mc - ip);
    float* dst = out + static_cast<size_t>(ip) * kc;
    for (int r = 0; r < mi; ++r) {
      const float* src = A + static_cast<size_t>(i0 + ip + r) * lda + k0;
      for (int k = 0; k < kc; ++k) dst[k * kMR + r] = src[k];
    }
  }
}

// The micro-kernel: acc[kRows][16·kVecs] = Σ_k a[i][k] · b[k][j]; then C = alpha·acc (+ C). kRows ≤ kMR rows of
// A, either packed (kPacked: a[k·kMR + i]) or read in place from row-major rows (a[i·lda + k]) when packing would
// cost as much as the product (few column panels); kVecs 16-lane vectors of B per k (a panel of 16·kVecs columns).
// Every element's arithmetic (one fused multiply-add per k, in k order, then the scale and the add of C) is the
// same for every kRows, kVecs and kPacked, so a result's bits do not depend on the tile it falls in.
template <int kRows, int kVecs, bool kPacked>
void MicroKernelT(int kc, const float* a, int lda, const float* b, float* c, int ldc, float alpha, bool accumulate) {
  constexpr int nr = 16 * kVecs;
  v16 acc[kRows][kVecs];
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i)
    for (int v = 0; v < kVecs; ++v) acc[i][v] = v16{};
  for (int k = 0; k < kc; ++k) {
    v16 bv[kVecs];
    for (int v = 0; v < kVecs; ++v) bv[v] = Load(b + k * nr + 16 * v);
#pragma GCC unroll 12
    for (int i = 0; i < kRows; ++i) {
      const v16 ai = Splat(kPacked ? a[k * kMR + i] : a[static_cast<size_t>(i) * lda + k]);
      for (int v = 0; v < kVecs; ++v) acc[i][v] += ai * bv[v];
    }
  }
  const v16 va = Splat(alpha);
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
    float* ci = c + static_cast<size_t>(i) * ldc;
    for (int v = 0; v < kVecs; ++v) {
      v16 r = acc[i][v] * va;
      if (accumulate) r += Load(ci + 16 * v);
      Store(ci + 16 * v, r);
    }
  }
}

using MicroKernelFn = void (*)(int, const float*, int, const float*, float*, int, float, bool);

template <int kVecs, bool kPacked, int... kRows>
constexpr std::array<MicroKernelFn, kMR> KernelsByRows(std::integer_sequence<int, kRows...>) {
  return {&MicroKernelT<kRows + 1, kVecs, kPacked>...};
}

// The micro-kernel for `rows` rows (1…kMR), a panel of `nr` columns (16 or 32) and A packed or in place.
MicroKernelFn SelectKernel(int rows, int nr, bool packed) {
  static constexpr auto k1p = KernelsByRows<1, true>(std::make_integer_sequence<int, kMR>{});
  static constexpr auto k1r = KernelsByRows<1, false>(std::make_integer_sequence<int, kMR>{});
  static constexpr auto k2p = KernelsByRows<2, true>(std::make_integer_sequence<int, kMR>{});
  static constexpr auto k2r = KernelsByRows<2, false>(std::make_integer_sequence<int, kMR>{});
  const auto& table = nr == 16 ? (packed ? k1p : k1r) : (packed ? k2p : k2r);
  return table[static_cast<size_t>(rows - 1)];
}

thread_local ScratchBuffer tl_apack;
thread_local ScratchBuffer tl_bpack;

void GemmBlockF32(const GemmArgs& g, const PackedB& B, int i0, int mc, int p0, int p1);
void Epilogue(const GemmArgs& g, int nr, int i0, int mc, int p0, int p1);

// A block of C with its epilogue, on the path B was packed for.
void GemmBlock(const GemmArgs& g, const PackedB& B, int i0, int mc, int p0, int p1) {
  if (B.bf16)
    GemmBlockBf16(g, B, i0, mc, p0, p1);
  else
    GemmBlockF32(g, B, i0, mc, p0, p1);
  Epilogue(g, B.nr, i0, mc, p0, p1);
}

// Computes rows [i0, i0+mc) × panels [p0, p1) of C over the whole K (no epilogue). Tiles at the bottom edge run
// the micro-kernel for their row count; tiles at the right edge compute a whole panel into a local tile and copy
// the valid columns.
void GemmBlockF32(const GemmArgs& g, const PackedB& B, int i0, int mc, int p0, int p1) {
  const int nr = B.nr;
  float* apack = tl_apack.Get(static_cast<size_t>(kMCMax + kMR) * kKC);
  // Packing A pays off when each packed panel feeds many column panels; with few (attention's P·V: N = head dim)
  // the micro-kernel reads A in place. Decided by N alone, so a row's bits never depend on M or on batching.
  const bool pack_a = (g.N + kNR - 1) / kNR > 4;
  for (int k0 = 0; k0 < g.K; k0 += kKC) {
    const int kc = std::min(kKC, g.K - k0);
    if (pack_a) PackA(g.A, g.lda, i0, mc, k0, kc, apack);
    const bool acc = g.accumulate || k0 > 0;
    for (int p = p0; p < p1; ++p) {
      const int j0 = p * nr;
      const int nj = std::min(nr, g.N - j0);
      const float* bp = B.data + (static_cast<size_t>(p) * g.K + k0) * nr;
      for (int ip = 0; ip < mc; ip += kMR) {
        const int mi = std::min(kMR, mc - ip);
        float* c = g.C + static_cast<size_t>(i0 + ip) * g.ldc + j0;
        const float* a = pack_a ? apack + static_cast<size_t>(ip) * kc : g.A + static_cast<size_t>(i0 + ip) * g.lda + k0;
        const MicroKernelFn kernel = SelectKernel(mi, nr, pack_a);
        if (nj == nr) {
          kernel(kc, a, g.lda, bp, c, g.ldc, g.alpha, acc);
        } else {
          alignas(64) float tile[kMR * kNR];
          kernel(kc, a, g.lda, bp, tile, nr, g.alpha, false);
          for (int i = 0; i < mi; ++i)
            for (int j = 0; j < nj; ++j) {
              float* cij = c + static_cast<size_t>(i) * g.ldc + j;
              *cij = acc ? *cij + tile[i * nr + j] : tile[i * nr + j];
            }
        }
      }
    }
  }
}

// Zeroes the block when K = 0, then adds bias and applies the activation: the epilogue of either path.
void Epilogue(const GemmArgs& g, int nr, int i0, int mc, int p0, int p1) {
  const int j0 = p0 * nr;
  const int j1 = std::min(g.N, p1 * nr);
  if (g.K == 0 && !g.accumulate) {
    for (int i = i0; i < i0 + mc; ++i)
      for (int j = j0; j < j1; ++j) g.C[static_cast<size_t>(i) * g.ldc + j] = 0.f;
  }
  if (g.bias != nullptr || g.act != Activation::kNone) {
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
  const int panels = (g.N + B.nr - 1) / B.nr;
  const int threads = ComputePool().threads();
  // Row blocks: kMC rows for large M; when M is small, one block per thread (each thread packs its A once and
  // the work is balanced), up to kMCMax rows, in multiples of 4 (a block's last tile runs the micro-kernel for its
  // own row count, so 64 rows on 2 threads are 32 + 32, not 36 + 28 with a 12-row tile computing 4). The block size
  // never changes a row's arithmetic.
  const int per_thread = (g.M + threads - 1) / threads;
  const int block = per_thread <= kMCMax ? (per_thread + 3) / 4 * 4 : kMC;
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
  PackedB view = PackBInto(B, g.N, g.K, ldb, layout, tl_bpack.Get(PackedSize(g.N, g.K)));
  GemmSerialPacked(g, view);
  view.data = nullptr;  // owned by the scratch, not by the view
}

void GemmSerialPacked(const GemmArgs& g, const PackedB& B) {
  if (g.M == 0 || g.N == 0) return;
  const int panels = (g.N + B.nr - 1) / B.nr;
  for (int i0 = 0; i0 < g.M; i0 += kMC) GemmBlock(g, B, i0, std::min(kMC, g.M - i0), 0, panels);
}

size_t PackedSize(int N, int K) {
  const int nr = GemmPanelWidth(N);
  return static_cast<size_t>((N + nr - 1) / nr) * static_cast<size_t>(K) * nr;
}

PackedB PackBInto(const float* B, int N, int K, int ldb, BLayout layout, float* out) {
  PackPanels(B, N, K, ldb, layout, out);
  PackedB view;
  view.N = N;
  view.K = K;
  view.nr = GemmPanelWidth(N);
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
