// Portable SIMD helpers over GCC vector extensions. With -march=native on an AVX-512 machine a `v16` maps to one
// zmm register; elsewhere the compiler splits it (two ymm on AVX2), so the same source serves both.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstring>
#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif

namespace omnirx {

typedef float v16 __attribute__((vector_size(64)));
typedef int i16 __attribute__((vector_size(64)));
// Unaligned variant for loads and stores at arbitrary float offsets.
typedef float v16u __attribute__((vector_size(64), aligned(4)));

inline v16 Load(const float* p) { return *reinterpret_cast<const v16u*>(p); }
inline void Store(float* p, v16 v) { *reinterpret_cast<v16u*>(p) = v; }
inline v16 Splat(float x) {
#if defined(__AVX512F__)
  return (v16)_mm512_set1_ps(x);
#else
  return v16{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
#endif
}

inline float HorizontalSum(v16 v) {
  float s = 0.f;
  for (int i = 0; i < 16; ++i) s += v[i];
  return s;
}
inline float HorizontalMax(v16 v) {
  float m = v[0];
  for (int i = 1; i < 16; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

inline v16 Max(v16 a, v16 b) { return a > b ? a : b; }
inline v16 Min(v16 a, v16 b) { return a < b ? a : b; }
// Clamp that lets NaN through (a NaN watch must still see it after an activation or a softmax).
inline v16 ClampKeepNaN(v16 x, float lo, float hi) {
  x = x > Splat(hi) ? Splat(hi) : x;
  return x < Splat(lo) ? Splat(lo) : x;
}

// exp(x) for 16 lanes: range reduction x = n·ln2 + r, |r| ≤ ln2/2, then a degree-6 polynomial for e^r
// (Cephes expf coefficients), scaled by 2^n through the exponent bits. Relative error about 2e-7 over the
// float range; inputs below -87.3 flush to 0, above 88.7 saturate at FLT_MAX·e-ish (callers clamp).
inline v16 Exp(v16 x) {
  x = ClampKeepNaN(x, -87.3365478515625f, 88.3762626647949f);
  const v16 log2e = Splat(1.44269504088896341f);
  v16 fx = x * log2e;
  // round to nearest
  i16 n = __builtin_convertvector(fx + (fx >= 0 ? Splat(0.5f) : Splat(-0.5f)), i16);
  v16 nf = __builtin_convertvector(n, v16);
  v16 r = x - nf * Splat(0.693359375f);
  r = r - nf * Splat(-2.12194440e-4f);
  v16 p = Splat(1.9875691500e-4f);
  p = p * r + Splat(1.3981999507e-3f);
  p = p * r + Splat(8.3334519073e-3f);
  p = p * r + Splat(4.1665795894e-2f);
  p = p * r + Splat(1.6666665459e-1f);
  p = p * r + Splat(5.0000001201e-1f);
  p = p * r * r + r + Splat(1.0f);
  i16 bits = (n + 127) << 23;
  v16 scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// tanh(x) = 1 − 2 / (exp(2x) + 1), with |x| clamped to 9 (tanh(9) = 1 − 3e-8 in float).
inline v16 Tanh(v16 x) {
  x = ClampKeepNaN(x, -9.f, 9.f);
  v16 e = Exp(x + x);
  return Splat(1.f) - Splat(2.f) / (e + Splat(1.f));
}

}  // namespace omnirx
