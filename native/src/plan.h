// Plan: a compiled list of native ops over values that live in one arena (intermediates, laid out by the JS
// planner), in constant tensors (weights, tables) or in per-run slots (inputs and outputs bound at run time).
// Compiling validates every op once; running one segment [from, to) is a single async call on the executor.
#pragma once
#include <napi.h>

#include <memory>
#include <vector>

#include "ops.h"

namespace omnirx {

struct CompiledPlan {
  std::vector<ValueDesc> values;
  std::vector<std::shared_ptr<Storage>> consts;
  std::vector<int64_t> slot_numel;
  std::vector<OpInstance> ops;
  // The arena is allocated by the first run, on the compute thread (first touch of fresh memory is slow).
  int64_t arena_floats = 0;
  mutable float* arena = nullptr;
  mutable size_t arena_bytes = 0;
  ~CompiledPlan();
  // Runs ops [from, to) with the given slot storages. Throws std::runtime_error naming the failing op.
  void Run(const std::vector<std::shared_ptr<Storage>>& slots, size_t from, size_t to) const;
};

class Plan : public Napi::ObjectWrap<Plan> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Plan(const Napi::CallbackInfo& info);

 private:
  Napi::Value Run(const Napi::CallbackInfo& info);
  Napi::Value Dispose(const Napi::CallbackInfo& info);
  Napi::Value GetNumOps(const Napi::CallbackInfo& info);
  Napi::Value GetArenaBytes(const Napi::CallbackInfo& info);
  std::shared_ptr<CompiledPlan> plan_;
};

}  // namespace omnirx
