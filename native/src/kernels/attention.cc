#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/kernels.h"
#include "simd.h"
#include "storage.h"
#include "thread_pool.h"

namespace omnirx {

namespace {

constexpr int kQTile = 64;

thread_local ScratchBuffer tl_scores;
thread_local ScratchBuffer tl_kv;

// Numerically stable softmax of one row in place; a row of −inf becomes zeros; NaN propagates. Vectorised: one
// pass for the max (and a NaN flag), one for exp and the sum, one to scale.
void SoftmaxRow(float* s, int n) {
  v16 vmax = Splat(-std::numeric_limits<float>::infinity());
  i16 nan{};
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    const v16 x = Load(s + j);
    nan |= (x != x);
    vmax = x > vmax ? x : vmax;
  }
  float m = HorizontalMax(vmax);
  bool has_nan = false;
  for (int l = 0; l < 16; ++l) has_nan |= nan[l] != 0;
  for (; j < n; ++j) {
    if (s[j] != s[j]) has_nan = true;
    m = s[j] > m ? s[j] : m;
  }
  if (has_nan) {
    for (int t = 0; t < n; ++t) s[t] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  if (m == -std::numeric_limits<float>::infinity()) {
    std::fill(s, s + n, 0.f);
    return;
  }
  const v16 vm = Splat(m);
  v16 vs{};
  j = 0;
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
  // Work items are (batch, head, query chunk). K and V of the head are packed once per item into the micro-kernel's
  // panel layout and reused by every query tile of the chunk; chunks exist only to give every thread work when
  // B·H is small.
  const int threads = ComputePool().threads();
  const int bh = a.B * a.H;
  const int chunks = std::max(1, std::min((2 * threads + bh - 1) / bh, (a.Lq + kQTile - 1) / kQTile));
  const int per_chunk = ((a.Lq + chunks - 1) / chunks + kQTile - 1) / kQTile * kQTile;
  ComputePool().ParallelFor(static_cast<size_t>(bh) * chunks, [&](size_t item, int) {
    const int chunk = static_cast<int>(item % chunks);
    const int h = static_cast<int>((item / chunks) % a.H);
    const int b = static_cast<int>(item / (static_cast<size_t>(chunks) * a.H));
    const int q_begin = chunk * per_chunk;
    const int q_end = std::min(a.Lq, q_begin + per_chunk);
    if (q_begin >= q_end) return;
    const size_t k_size = a.bf16 ? PackedSizeBf16(a.Lk, a.D) : PackedSize(a.Lk, a.D);
    const size_t v_size = a.bf16 ? PackedSizeBf16(a.D, a.Lk) : PackedSize(a.D, a.Lk);
    float* packs = tl_kv.Get(k_size + v_size);
    const auto pack = a.bf16 ? PackBBf16Into : PackBInto;
    PackedB kp = pack(a.k + static_cast<size_t>(b) * a.Lk * a.ldk + static_cast<size_t>(h) * a.D, a.Lk, a.D, a.ldk, BLayout::kNK, packs);
    PackedB vp = pack(a.v + static_cast<size_t>(b) * a.Lk * a.ldv + static_cast<size_t>(h) * a.D, a.D, a.Lk, a.ldv, BLayout::kKN, packs + k_size);
    float* S = tl_scores.Get(static_cast<size_t>(kQTile) * a.Lk);
    for (int i0 = q_begin; i0 < q_end; i0 += kQTile) {
      const int mq = std::min(kQTile, q_end - i0);
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
      GemmSerialPacked(g, kp);
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
      GemmSerialPacked(o, vp);
    }
    kp.data = nullptr;  // views into the scratch, not owners
    vp.data = nullptr;
  });
}

}  // namespace omnirx
