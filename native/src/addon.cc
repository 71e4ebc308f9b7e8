// Entry point: registers Tensor, Plan, the statistics call and the bf16 kernel check, and owns the executor for this
// instance.
#include <napi.h>

#include "addon.h"
#include "executor.h"
#include "kernels/gemm.h"
#include "plan.h"
#include "storage.h"
#include "tensor.h"
#include "thread_pool.h"

namespace omnirx {

AddonData::~AddonData() {
  if (executor && executor->Shutdown()) (void)executor.release();  // its detached thread still runs a job
}

AddonData& GetAddonData(Napi::Env env) { return *env.GetInstanceData<AddonData>(); }

namespace {

Napi::Value Stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  const MemoryStats& m = GlobalMemoryStats();
  const Executor& ex = *GetAddonData(env).executor;
  o.Set("bytesInUse", Napi::Number::New(env, static_cast<double>(m.bytes.load())));
  o.Set("buffers", Napi::Number::New(env, static_cast<double>(m.buffers.load())));
  o.Set("scratchBytes", Napi::Number::New(env, static_cast<double>(m.scratch_bytes.load())));
  o.Set("queued", Napi::Number::New(env, static_cast<double>(ex.queued())));
  o.Set("running", Napi::Number::New(env, static_cast<double>(ex.running())));
  o.Set("completed", Napi::Number::New(env, static_cast<double>(ex.completed())));
  o.Set("threads", Napi::Number::New(env, ComputePool().threads()));
  o.Set("bf16Native", Napi::Boolean::New(env, Bf16Native()));
  return o;
}

// bf16Check(): the bf16 micro-kernel's instruction vs its float32 emulation, bit for bit (Bf16KernelSelfCheck).
Napi::Value Bf16Check(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Bf16SelfCheck r = Bf16KernelSelfCheck();
  Napi::Object o = Napi::Object::New(env);
  o.Set("native", Napi::Boolean::New(env, Bf16Native()));
  o.Set("compared", Napi::Number::New(env, static_cast<double>(r.compared)));
  o.Set("mismatches", Napi::Number::New(env, static_cast<double>(r.mismatches)));
  return o;
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* data = new AddonData();
  env.SetInstanceData<AddonData>(data);
  Napi::Function tensor = Tensor::Init(env);
  Napi::Function plan = Plan::Init(env);
  data->tensor_ctor = Napi::Persistent(tensor);
  data->plan_ctor = Napi::Persistent(plan);
  data->executor = std::make_unique<Executor>(env);
  exports.Set("Tensor", tensor);
  exports.Set("Plan", plan);
  exports.Set("stats", Napi::Function::New(env, Stats, "stats"));
  exports.Set("bf16Check", Napi::Function::New(env, Bf16Check, "bf16Check"));
  return exports;
}

}  // namespace
}  // namespace omnirx

static Napi::Object InitOmnirx(Napi::Env env, Napi::Object exports) { return omnirx::Init(env, exports); }

NODE_API_MODULE(omnirx_native, InitOmnirx)
