#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "simd.h"
#include "thread_pool.h"

namespace omnirx {

namespace {
constexpr int64_t kChunk = 16384;
template <typename F>
void ForChunks(int64_t n, F&& f) {
  ComputePool().ParallelForWork(static_cast<size_t>((n + kChunk - 1) / kChunk), static_cast<size_t>(n), [&](size_t c, int) {
    const int64_t begin = static_cast<int64_t>(c) * kChunk;
    f(begin, std::min(n, begin + kChunk));
  });
}
}  // namespace

void Unary(const float* x, float* y, int64_t n, Activation act) {
  ForChunks(n, [&](int64_t b, int64_t e) {
    if (y != x) std::memcpy(y + b, x + b, sizeof(float) * (e - b));
    ApplyActivation(y + b, static_cast<size_t>(e - b), act);
  });
}

namespace {
template <typename F>
void Broadcast(const float* a, const float* b, float* y, int64_t n, int64_t nb, F op) {
  if (nb == n) {
    ForChunks(n, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) y[i] = op(a[i], b[i]);
    });
    return;
  }
  const int64_t rows = n / nb;
  ComputePool().ParallelForWork(static_cast<size_t>(rows), static_cast<size_t>(n), [&](size_t r, int) {
    const float* ar = a + r * nb;
    float* yr = y + r * nb;
    for (int64_t j = 0; j < nb; ++j) yr[j] = op(ar[j], b[j]);
  });
}
}  // namespace

void Add(const float* a, const float* b, float* y, int64_t n, int64_t nb) {
  Broadcast(a, b, y, n, nb, [](float u, float v) { return u + v; });
}

void Mul(const float* a, const float* b, float* y, int64_t n, int64_t nb) {
  Broadcast(a, b, y, n, nb, [](float u, float v) { return u * v; });
}

void Scale(const float* a, float* y, int64_t n, float s) {
  ForChunks(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = a[i] * s;
  });
}

namespace {
// Fills out[N] with chunk `idx` of the modulation for (b, g).
inline void ModulationRow(const Modulation& m, int b, int g, int idx, float* out) {
  const float* e = m.e + ((static_cast<size_t>(b) * m.G + g) * m.Ke + (m.Ke == 1 ? 0 : idx)) * static_cast<size_t>(m.N);
  if (m.table == nullptr) {
    std::memcpy(out, e, sizeof(float) * m.N);
    return;
  }
  const float* t = m.table + static_cast<size_t>(idx) * m.N;
  for (int j = 0; j < m.N; ++j) out[j] = e[j] + t[j];
}
}  // namespace

// Items are (batch, group, chunk of the group's tokens): the modulation rows are formed once per item.
struct RowChunks {
  int per_group, chunk, chunks;
  explicit RowChunks(const Modulation& m) : per_group(m.L / m.G) {
    chunk = std::max(1, std::min(per_group, 16384 / std::max(1, m.N)));
    chunks = (per_group + chunk - 1) / chunk;
  }
};

void Modulate(const float* x, float* y, const Modulation& m, int shift_idx, int scale_idx) {
  const RowChunks rc(m);
  ComputePool().ParallelForWork(static_cast<size_t>(m.B) * m.G * rc.chunks, static_cast<size_t>(m.B) * m.L * m.N, [&](size_t item, int) {
    const int c = static_cast<int>(item % rc.chunks);
    const int b = static_cast<int>(item / rc.chunks / m.G);
    const int g = static_cast<int>((item / rc.chunks) % m.G);
    std::vector<float> shift(m.N), scale(m.N);
    ModulationRow(m, b, g, shift_idx, shift.data());
    ModulationRow(m, b, g, scale_idx, scale.data());
    for (int j = 0; j < m.N; ++j) scale[j] += 1.f;
    const int l0 = g * rc.per_group + c * rc.chunk;
    const int l1 = std::min((g + 1) * rc.per_group, l0 + rc.chunk);
    for (int l = l0; l < l1; ++l) {
      const size_t row = static_cast<size_t>(b) * m.L + l;
      const float* xr = x + row * m.N;
      float* yr = y + row * m.N;
      for (int j = 0; j < m.N; ++j) yr[j] = xr[j] * scale[j] + shift[j];
    }
  });
}

void GatedAdd(const float* x, const float* r, float* y, const Modulation& m, int gate_idx) {
  const RowChunks rc(m);
  ComputePool().ParallelForWork(static_cast<size_t>(m.B) * m.G * rc.chunks, static_cast<size_t>(m.B) * m.L * m.N, [&](size_t item, int) {
    const int c = static_cast<int>(item % rc.chunks);
    const int b = static_cast<int>(item / rc.chunks / m.G);
    const int g = static_cast<int>((item / rc.chunks) % m.G);
    std::vector<float> gate;
    if (m.e != nullptr) {
      gate.resize(m.N);
      ModulationRow(m, b, g, gate_idx, gate.data());
    }
    const int l0 = g * rc.per_group + c * rc.chunk;
    const int l1 = std::min((g + 1) * rc.per_group, l0 + rc.chunk);
    for (int l = l0; l < l1; ++l) {
      const size_t row = static_cast<size_t>(b) * m.L + l;
      const float* xr = x + row * m.N;
      const float* rr = r + row * m.N;
      float* yr = y + row * m.N;
      if (m.e == nullptr) {
        for (int j = 0; j < m.N; ++j) yr[j] = xr[j] + rr[j];
      } else {
        for (int j = 0; j < m.N; ++j) yr[j] = xr[j] + rr[j] * gate[j];
      }
    }
  });
}

void Rope(const float* x, const float* cos, const float* sin, float* y, int B, int L, int H, int D) {
  const int half = D / 2;
  ComputePool().ParallelForWork(static_cast<size_t>(B) * L, static_cast<size_t>(B) * L * H * D, [&](size_t row, int) {
    const int l = static_cast<int>(row % L);
    const float* c = cos + static_cast<size_t>(l) * half;
    const float* s = sin + static_cast<size_t>(l) * half;
    for (int h = 0; h < H; ++h) {
      const float* xr = x + (row * H + h) * static_cast<size_t>(D);
      float* yr = y + (row * H + h) * static_cast<size_t>(D);
      for (int i = 0; i < half; ++i) {
        const float a = xr[2 * i], b = xr[2 * i + 1];
        yr[2 * i] = a * c[i] - b * s[i];
        yr[2 * i + 1] = a * s[i] + b * c[i];
      }
    }
  });
}

std::string Embedding(const float* ids, const float* table, float* y, int64_t L, int64_t V, int64_t N) {
  for (int64_t i = 0; i < L; ++i) {
    const float id = ids[i];
    if (!(id >= 0.f) || id >= static_cast<float>(V) || std::floor(id) != id) {
      return "embedding: token id " + std::to_string(id) + " at position " + std::to_string(i) +
             " is not an integer in [0, " + std::to_string(V) + ")";
    }
  }
  for (int64_t i = 0; i < L; ++i)
    std::memcpy(y + i * N, table + static_cast<int64_t>(ids[i]) * N, sizeof(float) * N);
  return "";
}

}  // namespace omnirx
