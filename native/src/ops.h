// The op table: each plan op names an OpDef that validates its operands once when the plan is compiled
// (Prepare, JS thread) and runs on the compute thread with raw pointers (Run). Operand −1 means "absent".
#pragma once
#include <napi.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "storage.h"

namespace omnirx {

enum class StorageKind { kArena = 0, kConst = 1, kSlot = 2 };

struct ValueDesc {
  StorageKind kind = StorageKind::kArena;
  int index = 0;       // const or slot index
  int64_t offset = 0;  // in floats from the start of the arena / tensor
  std::vector<int64_t> shape;
  int64_t numel = 0;
};

struct OpInstance {
  const struct OpDef* def = nullptr;
  std::string label;
  std::vector<int> in, out;
  std::vector<int64_t> ip;  // integer parameters, op-specific
  std::vector<float> fp;    // float parameters, op-specific
  std::shared_ptr<const PackedB> packed;  // pre-packed constant B operand (else packed per run)
  // Op-owned scratch (im2col), allocated on the compute thread at the first run: first touch of fresh memory is
  // slow and must not happen on the JS thread. Runs of one plan never overlap (one executor thread).
  size_t scratch_floats = 0;
  mutable float* scratch = nullptr;
  mutable size_t scratch_bytes = 0;
  float* Scratch() const;
  ~OpInstance();
};

// What Prepare may look at: operand descriptors, the JS attrs, and the const storages (for weight packing).
struct PrepareCtx {
  const std::vector<ValueDesc>& values;
  const std::vector<std::shared_ptr<Storage>>& consts;
  Napi::Object attrs;
  const ValueDesc* In(const OpInstance& op, size_t i) const;  // null when absent
  const ValueDesc& Out(const OpInstance& op, size_t i) const;
  int64_t Int(const char* name) const;
  int64_t IntOr(const char* name, int64_t fallback) const;
  // A size attribute: an integer in [1, 2^31).
  int64_t Dim(const char* name) const;
  int64_t DimOr(const char* name, int64_t fallback) const;
  // An index attribute: an integer in [0, bound).
  int64_t Index(const char* name, int64_t bound) const;
  float Float(const char* name) const;
  std::vector<int64_t> Ints(const char* name) const;
  // The storage behind a whole-tensor const operand (offset 0, same numel), else null.
  std::shared_ptr<Storage> WholeConst(const OpInstance& op, size_t i) const;
};

struct OpDef {
  const char* name;
  size_t min_in, max_in, n_out;
  void (*prepare)(OpInstance& op, const PrepareCtx& ctx);
  // ptr_in[i] is null for an absent operand. Returns an error message, or "" on success.
  std::string (*run)(const OpInstance& op, const float* const* ptr_in, float* const* ptr_out);
};

const OpDef* FindOp(const std::string& name);

}  // namespace omnirx
