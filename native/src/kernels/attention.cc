#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/kernels.h"
#include "simd.h"
#include "storage.h"
#include "thread_pool.h"

namespace omnirx {

namespace {

constexpr int kQTile = 32;

thread_local ScratchBuffer tl_scores;

// Numerically stable softmax of one row in place; a row of −inf becomes zeros; NaN propagates.
void SoftmaxRow(float* s, int n) {
  float m = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (int j = 0; j < n; ++j) {
    if (s[j] != s[j]) nan = true;
    m = s[j] > m ? s[j] : m;
  }
  if (nan) {
    for (int j = 0; j < n; ++j) s[j] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  if (m == -std::numeric_limits<float>::infinity()) {
    std::fill(s, s + n, 0.f);
    return;
  }
  const v16 vm = Splat(m);
  v16 vs{};
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    v16 e = Exp(Load(s + j) - vm);
    Store(s + j, e);
    vs += e;
  }
  float sum = HorizontalSum(vs);
  for (; j < n; ++j) {
    s[j] = std::exp(s[j] - m);
    sum += s[j];
  }
  const float inv = 1.f / sum;
  const v16 vi = Splat(inv);
  j = 0;
  for (; j + 16 <= n; j += 16) Store(s + j, Load(s + j) * vi);
  for (; j < n; ++j) s[j] *= inv;
}

}  // namespace

void Attention(const AttentionArgs& a) {
  const int qtiles = (a.Lq + kQTile - 1) / kQTile;
  const size_t items = static_cast<size_t>(a.B) * a.H * qtiles;
  ComputePool().ParallelFor(items, [&](size_t item, int) {
    const int qt = static_cast<int>(item % qtiles);
    const int h = static_cast<int>((item / qtiles) % a.H);
    const int b = static_cast<int>(item / (static_cast<size_t>(qtiles) * a.H));
    const int i0 = qt * kQTile;
    const int mq = std::min(kQTile, a.Lq - i0);
    float* S = tl_scores.Get(static_cast<size_t>(kQTile) * a.Lk);
    // S = scale · Q Kᵀ
    GemmArgs g;
    g.M = mq;
    g.N = a.Lk;
    g.K = a.D;
    g.A = a.q + (static_cast<size_t>(b) * a.Lq + i0) * a.ldq + static_cast<size_t>(h) * a.D;
    g.lda = a.ldq;
    g.C = S;
    g.ldc = a.Lk;
    g.alpha = a.scale;
    GemmSerial(g, a.k + static_cast<size_t>(b) * a.Lk * a.ldk + static_cast<size_t>(h) * a.D, a.ldk, BLayout::kNK);
    for (int i = 0; i < mq; ++i) {
      float* row = S + static_cast<size_t>(i) * a.Lk;
      if (a.bias != nullptr) {
        const size_t bb = a.bias_per_batch ? static_cast<size_t>(b) : 0;
        const float* brow = a.bias + ((bb * a.H + h) * a.Lq + i0 + i) * static_cast<size_t>(a.Lk);
        for (int j = 0; j < a.Lk; ++j) row[j] += brow[j];
      }
      SoftmaxRow(row, a.Lk);
    }
    // O = P V
    GemmArgs o;
    o.M = mq;
    o.N = a.D;
    o.K = a.Lk;
    o.A = S;
    o.lda = a.Lk;
    o.C = a.out + (static_cast<size_t>(b) * a.Lq + i0) * a.ldo + static_cast<size_t>(h) * a.D;
    o.ldc = a.ldo;
    GemmSerial(o, a.v + static_cast<size_t>(b) * a.Lk * a.ldv + static_cast<size_t>(h) * a.D, a.ldv, BLayout::kKN);
  });
}

}  // namespace omnirx
