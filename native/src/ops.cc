#include "ops.h"

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <unordered_map>

#include "kernels/kernels.h"
#include "tensor.h"

namespace omnirx {

namespace {

[[noreturn]] void Fail(const std::string& msg) { throw std::runtime_error(msg); }

void Require(bool ok, const std::string& msg) {
  if (!ok) Fail(msg);
}

std::string Desc(const ValueDesc* v) { return v == nullptr ? "(absent)" : ShapeString(v->shape); }

int64_t Last(const ValueDesc& v) { return v.shape.empty() ? 1 : v.shape.back(); }

void RequireNumel(const ValueDesc* v, int64_t n, const char* what) {
  Require(v != nullptr, std::string(what) + " is required");
  Require(v->numel == n, std::string(what) + " has shape " + Desc(v) + " (" + std::to_string(v->numel) +
                             " elements), expected " + std::to_string(n) + " elements");
}

// Product of non-negative sizes, failing instead of overflowing (no tensor holds more than 2^32 elements, so any
// product above 2^40 is an error anyway).
int64_t CheckedProduct(std::initializer_list<int64_t> xs) {
  int64_t p = 1;
  for (int64_t x : xs) {
    Require(x >= 0, "negative size");
    if (x != 0 && p > (int64_t{1} << 40) / x) Fail("sizes multiply to more than 2^40 elements");
    p *= x;
  }
  return p;
}

int CheckedInt(int64_t v, const char* what) {
  Require(v >= 0 && v <= INT32_MAX, std::string(what) + " = " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

// ---- linear: y[M, N] = act(x[M, K] · w[N, K]ᵀ + b[N]); matmulDtype 1 runs the bf16 GEMM path
std::shared_ptr<PackedB> PackLinearWeight(const float* w, int N, int K, bool bf16) {
  return bf16 ? PackBBf16(w, N, K, K) : PackB(w, N, K, K, BLayout::kNK);
}
void PrepareLinear(OpInstance& op, const PrepareCtx& c) {
  const ValueDesc* x = c.In(op, 0);
  const ValueDesc* w = c.In(op, 1);
  const ValueDesc* b = c.In(op, 2);
  Require(w->shape.size() == 2, "weight must be 2-D [N, K], got " + Desc(w));
  const int64_t N = w->shape[0], K = w->shape[1];
  Require(K > 0 && x->numel % K == 0, "input " + Desc(x) + " is not a multiple of K = " + std::to_string(K));
  const int64_t M = x->numel / K;
  if (b != nullptr) RequireNumel(b, N, "bias");
  RequireNumel(&c.Out(op, 0), M * N, "output");
  const int64_t act = c.IntOr("act", 0);
  Require(act >= 0 && act <= 2, "act must be 0 (none), 1 (gelu_tanh) or 2 (silu)");
  const int64_t bf16 = c.IntOr("matmulDtype", 0);
  Require(bf16 == 0 || bf16 == 1, "matmulDtype must be 0 (float32) or 1 (bfloat16)");
  op.ip = {CheckedInt(M, "M"), CheckedInt(N, "N"), CheckedInt(K, "K"), act, bf16};
  if (auto s = c.WholeConst(op, 1)) {
    std::lock_guard<std::mutex> lock(s->pack_mutex);
    std::shared_ptr<const PackedB>& slot = bf16 == 1 ? s->packed_bf16 : s->packed;
    if (!slot || slot->N != N || slot->K != K || slot->conv_order)
      slot = PackLinearWeight(s->data, static_cast<int>(N), static_cast<int>(K), bf16 == 1);
    op.packed = slot;
  }
}
std::string RunLinear(const OpInstance& op, const float* const* in, float* const* out) {
  GemmArgs g;
  g.M = static_cast<int>(op.ip[0]);
  g.N = static_cast<int>(op.ip[1]);
  g.K = static_cast<int>(op.ip[2]);
  g.act = static_cast<Activation>(op.ip[3]);
  g.A = in[0];
  g.lda = g.K;
  g.C = out[0];
  g.ldc = g.N;
  g.bias = in[2];
  if (op.packed) {
    Gemm(g, *op.packed);
  } else {
    Gemm(g, *PackLinearWeight(in[1], g.N, g.K, op.ip[4] == 1));
  }
  return "";
}

// ---- attention
void PrepareAttention(OpInstance& op, const PrepareCtx& c) {
  const ValueDesc* q = c.In(op, 0);
  const ValueDesc* k = c.In(op, 1);
  const ValueDesc* v = c.In(op, 2);
  const ValueDesc* bias = c.In(op, 3);
  const int64_t B = c.Dim("batch"), H = c.Dim("heads"), D = c.Dim("headDim");
  const int64_t row = CheckedProduct({B, H, D});
  Require(q->numel % row == 0, "q " + Desc(q) + " is not [B=" + std::to_string(B) + ", Lq, H·D=" + std::to_string(H * D) + "]");
  Require(k->numel % row == 0, "k " + Desc(k) + " is not [B, Lk, H·D=" + std::to_string(H * D) + "]");
  const int64_t Lq = q->numel / row, Lk = k->numel / row;
  Require(Lk > 0, "k has no keys");
  RequireNumel(v, k->numel, "v");
  RequireNumel(&c.Out(op, 0), q->numel, "output");
  int64_t per_batch = 0;
  if (bias != nullptr) {
    Require(bias->numel == H * Lq * Lk || bias->numel == B * H * Lq * Lk,
            "bias " + Desc(bias) + " must be [1 or B, H, Lq=" + std::to_string(Lq) + ", Lk=" + std::to_string(Lk) + "]");
    per_batch = bias->numel == B * H * Lq * Lk && B > 1;
  }
  const int64_t bf16 = c.IntOr("matmulDtype", 0);
  Require(bf16 == 0 || bf16 == 1, "matmulDtype must be 0 (float32) or 1 (bfloat16)");
  op.ip = {B, H, D, Lq, Lk, per_batch, bf16};
  op.fp = {c.Float("scale")};
}
std::string RunAttention(const OpInstance& op, const float* const* in, float* const* out) {
  AttentionArgs a;
  a.B = static_cast<int>(op.ip[0]);
  a.H = static_cast<int>(op.ip[1]);
  a.D = static_cast<int>(op.ip[2]);
  a.Lq = static_cast<int>(op.ip[3]);
  a.Lk = static_cast<int>(op.ip[4]);
  a.bias_per_batch = op.ip[5] != 0;
  a.q = in[0];
  a.k = in[1];
  a.v = in[2];
  a.bias = in[3];
  a.out = out[0];
  a.ldq = a.ldk = a.ldv = a.ldo = a.H * a.D;
  a.scale = op.fp[0];
  a.bf16 = op.ip[6] == 1;
  Attention(a);
  return "";
}

// ---- norms
void PrepareNorm(OpInstance& op, const PrepareCtx& c) {
  const ValueDesc* x = c.In(op, 0);
  const int64_t N = Last(*x);
  Require(N > 0, "input " + Desc(x) + " has an empty last dim");
  if (const ValueDesc* w = c.In(op, 1)) RequireNumel(w, N, "weight");
  if (const ValueDesc* b = c.In(op, 2)) RequireNumel(b, N, "bias");
  RequireNumel(&c.Out(op, 0), x->numel, "output");
  const float eps = c.Float("eps");
  Require(eps >= 0 && std::isfinite(eps), "eps must be finite and ≥ 0");
  op.ip = {x->numel / N, N, c.IntOr("l2", 0)};
  op.fp = {eps};
}
std::string RunLayerNorm(const OpInstance& op, const float* const* in, float* const* out) {
  LayerNorm(in[0], out[0], op.ip[0], op.ip[1], in[1], in[2], op.fp[0]);
  return "";
}
std::string RunRmsNorm(const OpInstance& op, const float* const* in, float* const* out) {
  RmsNorm(in[0], out[0], op.ip[0], op.ip[1], in[1], in[2], op.fp[0], op.ip[2] != 0);
  return "";
}

// ---- elementwise
void PrepareUnary(OpInstance& op, const PrepareCtx& c) {
  RequireNumel(&c.Out(op, 0), c.In(op, 0)->numel, "output");
  op.ip = {c.In(op, 0)->numel};
}
std::string RunGelu(const OpInstance& op, const float* const* in, float* const* out) {
  Unary(in[0], out[0], op.ip[0], Activation::kGeluTanh);
  return "";
}
std::string RunSilu(const OpInstance& op, const float* const* in, float* const* out) {
  Unary(in[0], out[0], op.ip[0], Activation::kSilu);
  return "";
}
void PrepareAdd(OpInstance& op, const PrepareCtx& c) {
  const ValueDesc* a = c.In(op, 0);
  const ValueDesc* b = c.In(op, 1);
  Require(b->numel > 0 && a->numel % b->numel == 0,
          "cannot broadcast " + Desc(b) + " over " + Desc(a) + " (size must divide)");
  RequireNumel(&c.Out(op, 0), a->numel, "output");
  op.ip = {a->numel, b->numel};
}
std::string RunAdd(const OpInstance& op, const float* const* in, float* const* out) {
  Add(in[0], in[1], out[0], op.ip[0], op.ip[1]);
  return "";
}
std::string RunMul(const OpInstance& op, const float* const* in, float* const* out) {
  Mul(in[0], in[1], out[0], op.ip[0], op.ip[1]);
  return "";
}
void PrepareScale(OpInstance& op, const PrepareCtx& c) {
  PrepareUnary(op, c);
  op.fp = {c.Float("scale")};
}
std::string RunScale(const OpInstance& op, const float* const* in, float* const* out) {
  Scale(in[0], out[0], op.ip[0], op.fp[0]);
  return "";
}

// Shared operand check for modulate / gated_add: x [B, L, N], e [B, G, Ke, N] with Ke ∈ {1, K}, table [K, N].
Modulation CheckModulation(const PrepareCtx& c, const ValueDesc* x, const ValueDesc* e, const ValueDesc* table) {
  Modulation m;
  const int64_t N = Last(*x);
  const int64_t B = c.DimOr("batch", 1), G = c.DimOr("groups", 1), K = c.DimOr("chunks", 1);
  const int64_t Ke = c.DimOr("eChunks", K);
  Require(N > 0, "the last dim must be positive");
  Require(Ke == 1 || Ke == K, "eChunks must be 1 or chunks");
  Require(x->numel % CheckedProduct({B, N}) == 0, "x " + Desc(x) + " is not [B, L, N]");
  const int64_t L = x->numel / (B * N);
  Require(L % G == 0, "L = " + std::to_string(L) + " tokens do not split into " + std::to_string(G) + " groups");
  if (e != nullptr) RequireNumel(e, CheckedProduct({B, G, Ke, N}), "modulation e [B, G, eChunks, N]");
  if (table != nullptr) RequireNumel(table, CheckedProduct({K, N}), "modulation table [chunks, N]");
  m.B = static_cast<int>(B);
  m.L = CheckedInt(L, "L");
  m.N = CheckedInt(N, "N");
  m.G = static_cast<int>(G);
  m.K = static_cast<int>(K);
  m.Ke = static_cast<int>(Ke);
  return m;
}
void StoreModulation(OpInstance& op, const Modulation& m) { op.ip = {m.B, m.L, m.N, m.G, m.K, m.Ke}; }
Modulation LoadModulation(const OpInstance& op, const float* e, const float* table) {
  Modulation m;
  m.B = static_cast<int>(op.ip[0]);
  m.L = static_cast<int>(op.ip[1]);
  m.N = static_cast<int>(op.ip[2]);
  m.G = static_cast<int>(op.ip[3]);
  m.K = static_cast<int>(op.ip[4]);
  m.Ke = static_cast<int>(op.ip[5]);
  m.e = e;
  m.table = table;
  return m;
}

// ---- modulate: in x, e, table?
void PrepareModulate(OpInstance& op, const PrepareCtx& c) {
  c.Dim("chunks");  // required here
  Modulation m = CheckModulation(c, c.In(op, 0), c.In(op, 1), c.In(op, 2));
  const int64_t shift = c.Index("shift", m.K), scale = c.Index("scale", m.K);
  RequireNumel(&c.Out(op, 0), c.In(op, 0)->numel, "output");
  StoreModulation(op, m);
  op.ip.push_back(shift);
  op.ip.push_back(scale);
}
std::string RunModulate(const OpInstance& op, const float* const* in, float* const* out) {
  Modulate(in[0], out[0], LoadModulation(op, in[1], in[2]), static_cast<int>(op.ip[6]), static_cast<int>(op.ip[7]));
  return "";
}

// ---- gated_add: in x, r, e?, table?
void PrepareGatedAdd(OpInstance& op, const PrepareCtx& c) {
  const ValueDesc* e = c.In(op, 2);
  Require(e != nullptr || c.In(op, 3) == nullptr, "a table needs e");
  Modulation m = CheckModulation(c, c.In(op, 0), e, c.In(op, 3));
  const int64_t gate = e == nullptr ? -1 : c.Index("gate", m.K);
  RequireNumel(c.In(op, 1), c.In(op, 0)->numel, "residual");
  RequireNumel(&c.Out(op, 0), c.In(op, 0)->numel, "output");
  StoreModulation(op, m);
  op.ip.push_back(gate);
}
std::string RunGatedAdd(const OpInstance& op, const float* const* in, float* const* out) {
  GatedAdd(in[0], in[1], out[0], LoadModulation(op, in[2], in[3]), static_cast<int>(op.ip[6]));
  return "";
}

// ---- rope: x [B, L, H, D], cos/sin [L, D/2]
void PrepareRope(OpInstance& op, const PrepareCtx& c) {
  const int64_t B = c.Dim("batch"), H = c.Dim("heads"), D = c.Dim("headDim");
  Require(D % 2 == 0, "headDim must be even");
  const ValueDesc* x = c.In(op, 0);
  Require(x->numel % CheckedProduct({B, H, D}) == 0, "x " + Desc(x) + " is not [B, L, H, D]");
  const int64_t L = x->numel / (B * H * D);
  RequireNumel(c.In(op, 1), L * D / 2, "cos [L, D/2]");
  RequireNumel(c.In(op, 2), L * D / 2, "sin [L, D/2]");
  RequireNumel(&c.Out(op, 0), x->numel, "output");
  op.ip = {B, L, H, D};
}
std::string RunRope(const OpInstance& op, const float* const* in, float* const* out) {
  Rope(in[0], in[1], in[2], out[0], static_cast<int>(op.ip[0]), static_cast<int>(op.ip[1]), static_cast<int>(op.ip[2]),
       static_cast<int>(op.ip[3]));
  return "";
}

// ---- embedding: ids [L], table [V, N] → [L, N]
void PrepareEmbedding(OpInstance& op, const PrepareCtx& c) {
  const ValueDesc* ids = c.In(op, 0);
  const ValueDesc* table = c.In(op, 1);
  Require(table->shape.size() == 2, "table must be [V, N], got " + Desc(table));
  RequireNumel(&c.Out(op, 0), ids->numel * table->shape[1], "output");
  op.ip = {ids->numel, table->shape[0], table->shape[1]};
}
std::string RunEmbedding(const OpInstance& op, const float* const* in, float* const* out) {
  return Embedding(in[0], in[1], out[0], op.ip[0], op.ip[1], op.ip[2]);
}

// ---- permute
void PreparePermute(OpInstance& op, const PrepareCtx& c) {
  std::vector<int64_t> dims = c.Ints("dims");
  std::vector<int64_t> perm = c.Ints("perm");
  Require(!dims.empty() && dims.size() <= 8 && perm.size() == dims.size(), "dims and perm must have the same rank 1..8");
  int64_t n = 1;
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    Require(dims[i] >= 0 && dims[i] <= INT32_MAX, "dims must be integers in [0, 2^31)");
    n = CheckedProduct({n, dims[i]});
    Require(perm[i] >= 0 && perm[i] < static_cast<int64_t>(dims.size()) && !seen[perm[i]], "perm is not a permutation");
    seen[perm[i]] = true;
  }
  RequireNumel(c.In(op, 0), n, "input");
  RequireNumel(&c.Out(op, 0), n, "output");
  op.ip = dims;
  op.ip.insert(op.ip.end(), perm.begin(), perm.end());
}
std::string RunPermute(const OpInstance& op, const float* const* in, float* const* out) {
  const int rank = static_cast<int>(op.ip.size() / 2);
  int perm[8];
  for (int i = 0; i < rank; ++i) perm[i] = static_cast<int>(op.ip[rank + i]);
  Permute(in[0], out[0], op.ip.data(), perm, rank);
  return "";
}

// ---- upsample: [F, H, W, C] → [F, 2H, 2W, C]
void PrepareUpsample(OpInstance& op, const PrepareCtx& c) {
  const int64_t F = c.Dim("frames"), H = c.Dim("height"), W = c.Dim("width"), C = c.Dim("channels");
  RequireNumel(c.In(op, 0), CheckedProduct({F, H, W, C}), "input [F, H, W, C]");
  RequireNumel(&c.Out(op, 0), CheckedProduct({F, H, W, C, 4}), "output [F, 2H, 2W, C]");
  op.ip = {F, H, W, C};
}
std::string RunUpsample(const OpInstance& op, const float* const* in, float* const* out) {
  UpsampleNearest2x(in[0], out[0], op.ip[0], op.ip[1], op.ip[2], op.ip[3]);
  return "";
}

// ---- conv3d (causal): in x [F, H, W, Ci], w [Co, Ci, kt, kh, kw], b [Co]?, history [kt−1, H, W, Ci]?
void PrepareConv3d(OpInstance& op, const PrepareCtx& c) {
  const int64_t F = c.Dim("frames"), H = c.Dim("height"), W = c.Dim("width");
  const ValueDesc* w = c.In(op, 1);
  Require(w->shape.size() == 5, "weight must be [Co, Ci, kt, kh, kw], got " + Desc(w));
  const int64_t Co = w->shape[0], Ci = w->shape[1], kt = w->shape[2], kh = w->shape[3], kw = w->shape[4];
  Require(kh % 2 == 1 && kw % 2 == 1 && kt >= 1, "spatial kernel sizes must be odd");
  RequireNumel(c.In(op, 0), CheckedProduct({F, H, W, Ci}), "input [F, H, W, Ci]");
  if (const ValueDesc* b = c.In(op, 2)) RequireNumel(b, Co, "bias");
  if (const ValueDesc* h = c.In(op, 3)) RequireNumel(h, CheckedProduct({kt - 1, H, W, Ci}), "history [kt-1, H, W, Ci]");
  RequireNumel(&c.Out(op, 0), CheckedProduct({F, H, W, Co}), "output [F, H, W, Co]");
  const int64_t kfeat = CheckedProduct({Ci, kt, kh, kw});
  Require(H * W <= INT32_MAX && kfeat <= INT32_MAX, "conv too large");
  op.ip = {F, H, W, Ci, Co, kt, kh, kw};
  if (auto s = c.WholeConst(op, 1)) {
    std::lock_guard<std::mutex> lock(s->pack_mutex);
    if (!s->packed || s->packed->N != Co || s->packed->K != kfeat || !s->packed->conv_order)
      s->packed = PackConvWeight(s->data, Co, Ci, static_cast<int>(kt), static_cast<int>(kh), static_cast<int>(kw));
    op.packed = s->packed;
  }
}
std::string RunConv3d(const OpInstance& op, const float* const* in, float* const* out) {
  Conv3dArgs a;
  a.F = op.ip[0];
  a.H = op.ip[1];
  a.W = op.ip[2];
  a.Ci = op.ip[3];
  a.Co = op.ip[4];
  a.kt = static_cast<int>(op.ip[5]);
  a.kh = static_cast<int>(op.ip[6]);
  a.kw = static_cast<int>(op.ip[7]);
  a.x = in[0];
  a.bias = in[2];
  a.history = in[3];
  a.y = out[0];
  if (op.packed) {
    Conv3dCausal(a, *op.packed);
  } else {
    Conv3dCausal(a, *PackConvWeight(in[1], a.Co, a.Ci, a.kt, a.kh, a.kw));
  }
  return "";
}

// ---- copy
std::string RunCopy(const OpInstance& op, const float* const* in, float* const* out) {
  if (in[0] != out[0]) std::memmove(out[0], in[0], sizeof(float) * op.ip[0]);
  return "";
}

const OpDef kOps[] = {
    {"linear", 2, 3, 1, PrepareLinear, RunLinear},
    {"attention", 3, 4, 1, PrepareAttention, RunAttention},
    {"layer_norm", 1, 3, 1, PrepareNorm, RunLayerNorm},
    {"rms_norm", 1, 3, 1, PrepareNorm, RunRmsNorm},
    {"gelu_tanh", 1, 1, 1, PrepareUnary, RunGelu},
    {"silu", 1, 1, 1, PrepareUnary, RunSilu},
    {"add", 2, 2, 1, PrepareAdd, RunAdd},
    {"mul", 2, 2, 1, PrepareAdd, RunMul},
    {"scale", 1, 1, 1, PrepareScale, RunScale},
    {"modulate", 2, 3, 1, PrepareModulate, RunModulate},
    {"gated_add", 2, 4, 1, PrepareGatedAdd, RunGatedAdd},
    {"rope", 3, 3, 1, PrepareRope, RunRope},
    {"embedding", 2, 2, 1, PrepareEmbedding, RunEmbedding},
    {"permute", 1, 1, 1, PreparePermute, RunPermute},
    {"upsample_nearest2x", 1, 1, 1, PrepareUpsample, RunUpsample},
    {"conv3d", 2, 4, 1, PrepareConv3d, RunConv3d},
    {"copy", 1, 1, 1, PrepareUnary, RunCopy},
};

}  // namespace

OpInstance::~OpInstance() { FreeAligned(scratch, scratch_bytes); }

float* OpInstance::Scratch() const {
  if (scratch == nullptr && scratch_floats > 0) scratch = AllocAligned(scratch_floats, &scratch_bytes);
  return scratch;
}

const ValueDesc* PrepareCtx::In(const OpInstance& op, size_t i) const {
  if (i >= op.in.size() || op.in[i] < 0) return nullptr;
  return &values[static_cast<size_t>(op.in[i])];
}
const ValueDesc& PrepareCtx::Out(const OpInstance& op, size_t i) const { return values[static_cast<size_t>(op.out[i])]; }

int64_t PrepareCtx::Int(const char* name) const {
  Napi::Value v = attrs.Get(name);
  if (!v.IsNumber()) Fail(std::string("attribute '") + name + "' must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9007199254740991.0)
    Fail(std::string("attribute '") + name + "' must be an integer");
  return static_cast<int64_t>(d);
}
int64_t PrepareCtx::IntOr(const char* name, int64_t fallback) const {
  return attrs.Has(name) && !attrs.Get(name).IsUndefined() ? Int(name) : fallback;
}
int64_t PrepareCtx::Dim(const char* name) const {
  const int64_t v = Int(name);
  if (v < 1 || v > INT32_MAX) Fail(std::string("attribute '") + name + "' must be an integer in [1, 2^31), got " + std::to_string(v));
  return v;
}
int64_t PrepareCtx::DimOr(const char* name, int64_t fallback) const {
  return attrs.Has(name) && !attrs.Get(name).IsUndefined() ? Dim(name) : fallback;
}
int64_t PrepareCtx::Index(const char* name, int64_t bound) const {
  const int64_t v = Int(name);
  if (v < 0 || v >= bound)
    Fail(std::string("attribute '") + name + "' = " + std::to_string(v) + " is outside [0, " + std::to_string(bound) + ")");
  return v;
}
float PrepareCtx::Float(const char* name) const {
  Napi::Value v = attrs.Get(name);
  if (!v.IsNumber()) Fail(std::string("attribute '") + name + "' must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d)) Fail(std::string("attribute '") + name + "' must be finite");
  return static_cast<float>(d);
}
std::vector<int64_t> PrepareCtx::Ints(const char* name) const {
  Napi::Value v = attrs.Get(name);
  if (!v.IsArray()) Fail(std::string("attribute '") + name + "' must be an array of integers");
  Napi::Array a = v.As<Napi::Array>();
  std::vector<int64_t> out;
  for (uint32_t i = 0; i < a.Length(); ++i) {
    Napi::Value e = a.Get(i);
    double d = e.IsNumber() ? e.As<Napi::Number>().DoubleValue() : NAN;
    if (!std::isfinite(d) || std::floor(d) != d) Fail(std::string("attribute '") + name + "' must hold integers");
    out.push_back(static_cast<int64_t>(d));
  }
  return out;
}
std::shared_ptr<Storage> PrepareCtx::WholeConst(const OpInstance& op, size_t i) const {
  const ValueDesc* v = In(op, i);
  if (v == nullptr || v->kind != StorageKind::kConst || v->offset != 0) return nullptr;
  const auto& s = consts[static_cast<size_t>(v->index)];
  return s->numel == static_cast<size_t>(v->numel) ? s : nullptr;
}

const OpDef* FindOp(const std::string& name) {
  static const std::unordered_map<std::string, const OpDef*> table = [] {
    std::unordered_map<std::string, const OpDef*> t;
    for (const OpDef& d : kOps) t[d.name] = &d;
    return t;
  }();
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace omnirx
