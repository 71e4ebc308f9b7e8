// Per-addon-instance data (set with napi_set_instance_data): registered constructors and the executor.
#pragma once
#include <napi.h>

#include <memory>

namespace omnirx {

class Executor;

struct AddonData {
  Napi::FunctionReference tensor_ctor;
  Napi::FunctionReference plan_ctor;
  std::unique_ptr<Executor> executor;
  ~AddonData();
};

AddonData& GetAddonData(Napi::Env env);

}  // namespace omnirx
