#include <algorithm>
#include <cstring>

#include "kernels/kernels.h"
#include "thread_pool.h"

namespace omnirx {

void Permute(const float* x, float* y, const int64_t* dims, const int* perm, int rank) {
  // Output dims and the input stride of each output axis.
  int64_t in_stride[8] = {}, out_dims[8] = {}, stride_of_out[8] = {};
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    in_stride[d] = s;
    s *= dims[d];
  }
  for (int d = 0; d < rank; ++d) {
    out_dims[d] = dims[perm[d]];
    stride_of_out[d] = in_stride[perm[d]];
  }
  const int64_t inner = out_dims[rank - 1];
  const int64_t inner_stride = stride_of_out[rank - 1];
  const int64_t rows = s / (inner == 0 ? 1 : inner);
  if (s == 0) return;
  // Several output rows per work item: a patchify's rows hold 2 floats, and one item per row costs far more in
  // dispatch than in copying.
  const int64_t per_item = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, inner));
  ComputePool().ParallelFor(static_cast<size_t>((rows + per_item - 1) / per_item), [&](size_t item, int) {
    const int64_t r_end = std::min(rows, static_cast<int64_t>(item + 1) * per_item);
    for (int64_t r = static_cast<int64_t>(item) * per_item; r < r_end; ++r) {
      // Decompose the output row index over the leading output axes.
      int64_t rem = r, off = 0;
      for (int d = rank - 2; d >= 0; --d) {
        const int64_t i = rem % out_dims[d];
        rem /= out_dims[d];
        off += i * stride_of_out[d];
      }
      float* yr = y + r * inner;
      if (inner_stride == 1) {
        std::memcpy(yr, x + off, sizeof(float) * inner);
      } else {
        for (int64_t j = 0; j < inner; ++j) yr[j] = x[off + j * inner_stride];
      }
    }
  });
}

void UpsampleNearest2x(const float* x, float* y, int64_t F, int64_t H, int64_t W, int64_t C) {
  ComputePool().ParallelFor(static_cast<size_t>(F * H * 2), [&](size_t row, int) {
    const int64_t f = static_cast<int64_t>(row) / (H * 2);
    const int64_t oy = static_cast<int64_t>(row) % (H * 2);
    const float* src = x + ((f * H) + oy / 2) * W * C;
    float* dst = y + static_cast<int64_t>(row) * W * 2 * C;
    for (int64_t ox = 0; ox < W * 2; ++ox) std::memcpy(dst + ox * C, src + (ox / 2) * C, sizeof(float) * C);
  });
}

}  // namespace omnirx
