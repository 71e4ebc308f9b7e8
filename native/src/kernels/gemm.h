// GEMM for the layouts omnirx models use, float32 in and out (operands optionally rounded to bf16, gemm_bf16.cc):
//   C[M, N] (+)= A[M, K] · op(B) (+ bias[N]), then an optional activation,
// with B either "NK" (B is [N, K] row-major, i.e. C = A·Bᵀ as in nn.Linear weights) or "KN" ([K, N] row-major).
// A register-blocked micro-kernel (kMR × kNR tile, accumulators in vector registers) over packed panels, in the
// style of BLIS / GotoBLAS (Goto & van de Geijn, "Anatomy of High-Performance Matrix Multiplication", 2008).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace omnirx {

enum class BLayout { kNK, kKN };

// Columns per packed B panel (two 16-lane vectors), shared by the float32 and bf16 paths.
constexpr int kGemmNR = 32;
// Columns per float32 panel for a B of N columns: one 16-lane vector when N ≤ 16 (a convolution to 16 or 3
// channels would otherwise spend half or more of every multiply-add on zero padding), else kGemmNR.
constexpr int GemmPanelWidth(int N) { return N <= 16 ? 16 : kGemmNR; }
enum class Activation { kNone = 0, kGeluTanh = 1, kSilu = 2 };

// B packed into column panels of nr: panel p holds B[k][p·nr + j] at data[(p·K + k)·nr + j], zero-padded.
struct PackedB {
  int N = 0;
  int K = 0;
  int nr = kGemmNR;  // columns per panel: GemmPanelWidth(N) for float32 packs, kGemmNR for bf16 packs
  float* data = nullptr;
  size_t bytes = 0;
  // K is in conv order (kt, kh, kw, Ci) rather than the weight's own (Ci, kt, kh, kw): see PackConvWeight.
  bool conv_order = false;
  // Panels hold bf16 pairs (see PackBBf16) rather than float32: Gemm then runs the bf16 path.
  bool bf16 = false;
  ~PackedB();
};

std::shared_ptr<PackedB> PackB(const float* B, int N, int K, int ldb, BLayout layout);

// B [N, K] (nn.Linear layout, row stride ldb) rounded to bf16 (nearest even) and packed for the bf16 path: panel p
// holds the pair (B[p·kNR + j][2k'], B[p·kNR + j][2k' + 1]) in 32-bit word (p·⌈K/2⌉ + k')·kNR + j, zero-padded.
// Half the bytes of the float32 packing. Defined in gemm_bf16.cc.
std::shared_ptr<PackedB> PackBBf16(const float* B, int N, int K, int ldb);

struct GemmArgs {
  int M = 0, N = 0, K = 0;
  const float* A = nullptr;
  int lda = 0;
  float* C = nullptr;
  int ldc = 0;
  const float* bias = nullptr;  // [N] or null
  float alpha = 1.f;            // scales A·B (applied before bias)
  bool accumulate = false;      // C += alpha·A·B instead of C = alpha·A·B
  Activation act = Activation::kNone;
};

// Multi-threaded over the compute pool (serial inside a parallel region). With a bf16-packed B, A is rounded to
// bf16 as it is packed and products accumulate in float32 (VDPBF16PS).
void Gemm(const GemmArgs& args, const PackedB& B);

// Whether the bf16 path runs the AVX512_BF16 instruction (built for a CPU that has it) or its plain float32
// emulation (same results, several times slower than the float32 path). Defined in gemm_bf16.cc.
bool Bf16Native();

// Compares the bf16 micro-kernel's AVX512_BF16 form with its plain float32 emulation on fixed operands spanning
// 2⁻²⁰…2²⁰ (no denormals), K from 2 to 384, with and without accumulation into C: `compared` output elements,
// `mismatches` that differ in any bit. Both 0 in a build without the instruction (only the emulation exists there,
// and the ordinary kernel tests run it). Defined in gemm_bf16.cc.
struct Bf16SelfCheck {
  int64_t compared = 0;
  int64_t mismatches = 0;
};
Bf16SelfCheck Bf16KernelSelfCheck();

// The bf16 path's block (rows [i0, i0+mc) × panels [p0, p1), no epilogue), for Gemm. Defined in gemm_bf16.cc.
void GemmBlockBf16(const GemmArgs& args, const PackedB& B, int i0, int mc, int p0, int p1);

// Serial GEMM with B packed on the fly into thread-local scratch.
void GemmSerial(const GemmArgs& args, const float* B, int ldb, BLayout layout);

// Serial GEMM against an already packed B (e.g. one head's K or V, packed once for many query tiles).
void GemmSerialPacked(const GemmArgs& args, const PackedB& B);

// Packs B into `out` (capacity from PackedSize, in floats) and returns a non-owning view; for per-thread scratch
// packing.
size_t PackedSize(int N, int K);
PackedB PackBInto(const float* B, int N, int K, int ldb, BLayout layout, float* out);

// The same for the bf16 path (capacity from PackedSizeBf16, in floats); either layout. Defined in gemm_bf16.cc.
size_t PackedSizeBf16(int N, int K);
PackedB PackBBf16Into(const float* B, int N, int K, int ldb, BLayout layout, float* out);

// Elementwise activation over a row segment (shared with the standalone activation ops).
void ApplyActivation(float* x, size_t n, Activation act);

}  // namespace omnirx
