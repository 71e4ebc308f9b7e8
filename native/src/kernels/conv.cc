#include <cstring>

#include "kernels/kernels.h"
#include "thread_pool.h"

namespace omnirx {

void Conv3dCausal(const Conv3dArgs& a, const PackedB& w) {
  const int64_t kfeat = a.Ci * a.kt * a.kh * a.kw;
  const int ph = (a.kh - 1) / 2, pw = (a.kw - 1) / 2;
  const int64_t frame = a.H * a.W * a.Ci;
  for (int64_t f = 0; f < a.F; ++f) {
    // im2col rows: for output position (y, x), features ordered (ci, dt, dy, dx) to match the flattened
    // [Co, Ci, kt, kh, kw] weight.
    ComputePool().ParallelFor(static_cast<size_t>(a.H), [&](size_t yy, int) {
      const int64_t y = static_cast<int64_t>(yy);
      for (int64_t x = 0; x < a.W; ++x) {
        float* col = a.im2col + (y * a.W + x) * kfeat;
        for (int dt = 0; dt < a.kt; ++dt) {
          const int64_t src_f = f - (a.kt - 1) + dt;
          const float* src_frame = nullptr;
          if (src_f >= 0)
            src_frame = a.x + src_f * frame;
          else if (a.history != nullptr)
            src_frame = a.history + (src_f + (a.kt - 1)) * frame;
          for (int dy = 0; dy < a.kh; ++dy) {
            const int64_t sy = y + dy - ph;
            for (int dx = 0; dx < a.kw; ++dx) {
              const int64_t sx = x + dx - pw;
              const bool inside = src_frame != nullptr && sy >= 0 && sy < a.H && sx >= 0 && sx < a.W;
              const float* px = inside ? src_frame + (sy * a.W + sx) * a.Ci : nullptr;
              const int64_t base = (dt * a.kh + dy) * a.kw + dx;
              const int64_t step = static_cast<int64_t>(a.kt) * a.kh * a.kw;
              for (int64_t ci = 0; ci < a.Ci; ++ci) col[ci * step + base] = inside ? px[ci] : 0.f;
            }
          }
        }
      }
    });
    GemmArgs g;
    g.M = static_cast<int>(a.H * a.W);
    g.N = static_cast<int>(a.Co);
    g.K = static_cast<int>(kfeat);
    g.A = a.im2col;
    g.lda = static_cast<int>(kfeat);
    g.C = a.y + f * a.H * a.W * a.Co;
    g.ldc = static_cast<int>(a.Co);
    g.bias = a.bias;
    Gemm(g, w);
  }
}

}  // namespace omnirx
