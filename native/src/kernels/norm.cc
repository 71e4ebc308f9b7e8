#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"
#include "simd.h"
#include "thread_pool.h"

namespace omnirx {

namespace {
// Rows per parallel item: enough work to amortise dispatch.
int64_t RowsPerItem(int64_t N) { return N >= 4096 ? 1 : std::max<int64_t>(1, 4096 / N); }

double RowSum(const float* x, int64_t N) {
  v16 acc{};
  int64_t j = 0;
  for (; j + 16 <= N; j += 16) acc += Load(x + j);
  double s = HorizontalSum(acc);
  for (; j < N; ++j) s += x[j];
  return s;
}
double RowSumSqDev(const float* x, int64_t N, float mean) {
  v16 acc{};
  const v16 m = Splat(mean);
  int64_t j = 0;
  for (; j + 16 <= N; j += 16) {
    v16 d = Load(x + j) - m;
    acc += d * d;
  }
  double s = HorizontalSum(acc);
  for (; j < N; ++j) s += (x[j] - mean) * (x[j] - mean);
  return s;
}
}  // namespace

void LayerNorm(const float* x, float* y, int64_t M, int64_t N, const float* w, const float* b, float eps) {
  const int64_t per = RowsPerItem(N);
  ComputePool().ParallelForWork(static_cast<size_t>((M + per - 1) / per), static_cast<size_t>(M * N), [&](size_t item, int) {
    for (int64_t i = static_cast<int64_t>(item) * per; i < std::min(M, static_cast<int64_t>(item + 1) * per); ++i) {
      const float* xi = x + i * N;
      float* yi = y + i * N;
      const float mean = static_cast<float>(RowSum(xi, N) / N);
      const float var = static_cast<float>(RowSumSqDev(xi, N, mean) / N);
      const float rstd = 1.f / std::sqrt(var + eps);
      for (int64_t j = 0; j < N; ++j) {
        float v = (xi[j] - mean) * rstd;
        if (w != nullptr) v *= w[j];
        if (b != nullptr) v += b[j];
        yi[j] = v;
      }
    }
  });
}

void RmsNorm(const float* x, float* y, int64_t M, int64_t N, const float* w, const float* b, float eps, bool l2) {
  const int64_t per = RowsPerItem(N);
  ComputePool().ParallelForWork(static_cast<size_t>((M + per - 1) / per), static_cast<size_t>(M * N), [&](size_t item, int) {
    for (int64_t i = static_cast<int64_t>(item) * per; i < std::min(M, static_cast<int64_t>(item + 1) * per); ++i) {
      const float* xi = x + i * N;
      float* yi = y + i * N;
      const double ss = RowSumSqDev(xi, N, 0.f);
      float r;
      if (l2) {
        const double norm = std::sqrt(ss);
        r = static_cast<float>(std::sqrt(static_cast<double>(N)) / (norm > eps ? norm : eps));
      } else {
        r = static_cast<float>(1.0 / std::sqrt(ss / N + eps));
      }
      for (int64_t j = 0; j < N; ++j) {
        float v = xi[j] * r;
        if (w != nullptr) v *= w[j];
        if (b != nullptr) v += b[j];
        yi[j] = v;
      }
    }
  });
}

}  // namespace omnirx
