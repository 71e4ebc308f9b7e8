#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "storage.h"
#include "thread_pool.h"

namespace omnirx {

namespace {

// Per-thread im2col tile: rows of one pixel block, reused across calls (never freed while the thread lives).
thread_local ScratchBuffer tl_im2col;

// Pixels per im2col tile: about 256 KiB of features per tile so a tile and its GEMM stay in L2, at least one
// micro-kernel row block, and at least four tiles per thread when the frame is small (balance over the pool).
int64_t TilePixels(int64_t pixels, int64_t kfeat, int threads) {
  const int64_t by_cache = std::max<int64_t>(12, (256 * 1024 / 4) / std::max<int64_t>(kfeat, 1));
  const int64_t by_balance = std::max<int64_t>(12, (pixels + 4 * threads - 1) / (4 * threads));
  int64_t t = std::min(by_cache, by_balance);
  return std::max<int64_t>(12, t / 12 * 12);
}

}  // namespace

std::shared_ptr<PackedB> PackConvWeight(const float* w, int64_t Co, int64_t Ci, int kt, int kh, int kw) {
  const int64_t taps = static_cast<int64_t>(kt) * kh * kw;
  const int64_t kfeat = Ci * taps;
  // [Co, Ci, kt, kh, kw] → [Co, kt, kh, kw, Ci]: feature order (tap, ci), as `Conv3dCausal` lays out its im2col.
  std::vector<float> perm(static_cast<size_t>(Co * kfeat));
  for (int64_t o = 0; o < Co; ++o)
    for (int64_t ci = 0; ci < Ci; ++ci)
      for (int64_t t = 0; t < taps; ++t) perm[static_cast<size_t>(o * kfeat + t * Ci + ci)] = w[o * kfeat + ci * taps + t];
  auto packed = PackB(perm.data(), static_cast<int>(Co), static_cast<int>(kfeat), static_cast<int>(kfeat), BLayout::kNK);
  packed->conv_order = true;
  return packed;
}

void Conv3dCausal(const Conv3dArgs& a, const PackedB& w) {
  const int64_t taps = static_cast<int64_t>(a.kt) * a.kh * a.kw;
  const int64_t kfeat = a.Ci * taps;
  const int ph = (a.kh - 1) / 2, pw = (a.kw - 1) / 2;
  const int64_t frame = a.H * a.W * a.Ci;
  const int64_t pixels = a.H * a.W;
  const int64_t tile = TilePixels(pixels, kfeat, ComputePool().threads());
  const int64_t tiles = (pixels + tile - 1) / tile;
  const size_t ci_bytes = sizeof(float) * static_cast<size_t>(a.Ci);
  for (int64_t f = 0; f < a.F; ++f) {
    // Source frame of each temporal tap: the input, the history (causal padding from the previous chunk) or zeros.
    std::vector<const float*> src(static_cast<size_t>(a.kt));
    for (int dt = 0; dt < a.kt; ++dt) {
      const int64_t sf = f - (a.kt - 1) + dt;
      src[static_cast<size_t>(dt)] = sf >= 0 ? a.x + sf * frame : (a.history != nullptr ? a.history + (sf + (a.kt - 1)) * frame : nullptr);
    }
    ComputePool().ParallelFor(static_cast<size_t>(tiles), [&](size_t ti, int) {
      const int64_t p0 = static_cast<int64_t>(ti) * tile;
      const int64_t rows = std::min(tile, pixels - p0);
      float* col = tl_im2col.Get(static_cast<size_t>(tile * kfeat));
      // im2col rows for pixels [p0, p0 + rows): features (dt, dy, dx, ci), so each tap is one contiguous copy of
      // Ci channels (the activation is channels-last), or zeros outside the frame / before the first frame.
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t p = p0 + r;
        const int64_t y = p / a.W, x = p % a.W;
        float* row = col + r * kfeat;
        for (int dt = 0; dt < a.kt; ++dt) {
          const float* sf = src[static_cast<size_t>(dt)];
          for (int dy = 0; dy < a.kh; ++dy) {
            const int64_t sy = y + dy - ph;
            for (int dx = 0; dx < a.kw; ++dx) {
              const int64_t sx = x + dx - pw;
              float* dst = row + ((static_cast<int64_t>(dt) * a.kh + dy) * a.kw + dx) * a.Ci;
              if (sf != nullptr && sy >= 0 && sy < a.H && sx >= 0 && sx < a.W)
                std::memcpy(dst, sf + (sy * a.W + sx) * a.Ci, ci_bytes);
              else
                std::memset(dst, 0, ci_bytes);
            }
          }
        }
      }
      GemmArgs g;
      g.M = static_cast<int>(rows);
      g.N = static_cast<int>(a.Co);
      g.K = static_cast<int>(kfeat);
      g.A = col;
      g.lda = static_cast<int>(kfeat);
      g.C = a.y + (f * pixels + p0) * a.Co;
      g.ldc = static_cast<int>(a.Co);
      g.bias = a.bias;
      GemmSerialPacked(g, w);
    });
  }
}

}  // namespace omnirx
