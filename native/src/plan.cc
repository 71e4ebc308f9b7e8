#include "plan.h"

#include <stdexcept>

#include "addon.h"
#include "executor.h"
#include "tensor.h"

namespace omnirx {

namespace {

class RunJob : public Job {
 public:
  RunJob(Napi::Env env, std::shared_ptr<CompiledPlan> plan, std::vector<std::shared_ptr<Storage>> slots, size_t from,
         size_t to)
      : deferred_(Napi::Promise::Deferred::New(env)), plan_(std::move(plan)), slots_(std::move(slots)), from_(from), to_(to) {}
  Napi::Promise Promise() const { return deferred_.Promise(); }
  void Execute() override { plan_->Run(slots_, from_, to_); }
  void Complete(Napi::Env env, const std::string& err) override {
    // Release storages before settling so a disposal awaited by JS is visible in the memory statistics.
    slots_.clear();
    plan_.reset();
    if (err.empty()) {
      deferred_.Resolve(env.Undefined());
    } else {
      Napi::Error e = Napi::Error::New(env, err);
      e.Set("code", Napi::String::New(env, "OMNIRX_ERR_NATIVE"));
      deferred_.Reject(e.Value());
    }
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::shared_ptr<CompiledPlan> plan_;
  std::vector<std::shared_ptr<Storage>> slots_;
  size_t from_, to_;
};

int64_t GetInt(const Napi::Env& env, const Napi::Object& o, const char* key, const std::string& where) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber()) throw Napi::TypeError::New(env, where + ": '" + key + "' must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d > 9007199254740991.0 || static_cast<double>(static_cast<int64_t>(d)) != d)
    throw Napi::RangeError::New(env, where + ": '" + key + "' must be a non-negative integer");
  return static_cast<int64_t>(d);
}

Napi::Array GetArray(const Napi::Env& env, const Napi::Object& o, const char* key, const std::string& where) {
  Napi::Value v = o.Get(key);
  if (!v.IsArray()) throw Napi::TypeError::New(env, where + ": '" + key + "' must be an array");
  return v.As<Napi::Array>();
}

}  // namespace

CompiledPlan::~CompiledPlan() { FreeAligned(arena, arena_bytes); }

void CompiledPlan::Run(const std::vector<std::shared_ptr<Storage>>& slots, size_t from, size_t to) const {
  if (arena == nullptr) arena = AllocAligned(static_cast<size_t>(arena_floats), &arena_bytes);
  std::vector<float*> base(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const ValueDesc& v = values[i];
    float* p = v.kind == StorageKind::kArena ? arena
               : v.kind == StorageKind::kConst ? consts[static_cast<size_t>(v.index)]->data
                                               : slots[static_cast<size_t>(v.index)]->data;
    base[i] = p + v.offset;
  }
  const float* in[8];
  float* out[4];
  for (size_t i = from; i < to; ++i) {
    const OpInstance& op = ops[i];
    for (size_t j = 0; j < op.in.size(); ++j) in[j] = op.in[j] < 0 ? nullptr : base[static_cast<size_t>(op.in[j])];
    for (size_t j = op.in.size(); j < 8; ++j) in[j] = nullptr;
    for (size_t j = 0; j < op.out.size(); ++j) out[j] = base[static_cast<size_t>(op.out[j])];
    std::string err = op.def->run(op, in, out);
    if (!err.empty()) throw std::runtime_error("op #" + std::to_string(i) + " " + op.def->name + " '" + op.label + "': " + err);
  }
}

Napi::Function Plan::Init(Napi::Env env) {
  return DefineClass(env, "Plan",
                     {
                         InstanceMethod<&Plan::Run>("run"),
                         InstanceMethod<&Plan::Dispose>("dispose"),
                         InstanceAccessor<&Plan::GetNumOps>("numOps"),
                         InstanceAccessor<&Plan::GetArenaBytes>("arenaBytes"),
                     });
}

Plan::Plan(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Plan>(info) {
  Napi::Env env = info.Env();
  if (!info[0].IsObject()) throw Napi::TypeError::New(env, "Plan: spec must be an object");
  Napi::Object spec = info[0].As<Napi::Object>();
  auto plan = std::make_shared<CompiledPlan>();

  Napi::Array consts = GetArray(env, spec, "consts", "Plan");
  for (uint32_t i = 0; i < consts.Length(); ++i)
    plan->consts.push_back(Tensor::FromValue(consts.Get(i), "Plan: consts[" + std::to_string(i) + "]")->storage());

  Napi::Array slots = GetArray(env, spec, "slots", "Plan");
  for (uint32_t i = 0; i < slots.Length(); ++i) {
    std::vector<int64_t> shape = ParseShape(env, slots.Get(i), "Plan: slots[" + std::to_string(i) + "]");
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    plan->slot_numel.push_back(n);
  }

  const int64_t arena_floats = GetInt(env, spec, "arenaFloats", "Plan");
  if (arena_floats > (int64_t{1} << 33)) throw Napi::RangeError::New(env, "Plan: arena larger than 32 GiB");

  Napi::Array values = GetArray(env, spec, "values", "Plan");
  for (uint32_t i = 0; i < values.Length(); ++i) {
    const std::string where = "Plan: values[" + std::to_string(i) + "]";
    if (!values.Get(i).IsObject()) throw Napi::TypeError::New(env, where + " must be an object");
    Napi::Object o = values.Get(i).As<Napi::Object>();
    ValueDesc v;
    const int64_t kind = GetInt(env, o, "kind", where);
    if (kind > 2) throw Napi::RangeError::New(env, where + ": kind must be 0 (arena), 1 (const) or 2 (slot)");
    v.kind = static_cast<StorageKind>(kind);
    const int64_t index = GetInt(env, o, "index", where);
    v.offset = GetInt(env, o, "offset", where);
    v.shape = ParseShape(env, o.Get("shape"), where);
    v.numel = 1;
    for (int64_t d : v.shape) v.numel *= d;
    int64_t capacity = 0;
    if (v.kind == StorageKind::kArena) {
      capacity = arena_floats;
    } else if (v.kind == StorageKind::kConst) {
      if (index >= static_cast<int64_t>(plan->consts.size())) throw Napi::RangeError::New(env, where + ": const index out of range");
      v.index = static_cast<int>(index);
      capacity = static_cast<int64_t>(plan->consts[static_cast<size_t>(v.index)]->numel);
    } else {
      if (index >= static_cast<int64_t>(plan->slot_numel.size())) throw Napi::RangeError::New(env, where + ": slot index out of range");
      v.index = static_cast<int>(index);
      capacity = plan->slot_numel[static_cast<size_t>(v.index)];
    }
    if (v.offset + v.numel > capacity)
      throw Napi::RangeError::New(env, where + ": offset " + std::to_string(v.offset) + " + " + std::to_string(v.numel) +
                                           " elements exceed its storage of " + std::to_string(capacity));
    plan->values.push_back(std::move(v));
  }

  plan->arena_floats = arena_floats;

  Napi::Array ops = GetArray(env, spec, "ops", "Plan");
  plan->ops.resize(ops.Length());
  for (uint32_t i = 0; i < ops.Length(); ++i) {
    std::string where = "Plan: op #" + std::to_string(i);
    if (!ops.Get(i).IsObject()) throw Napi::TypeError::New(env, where + " must be an object");
    Napi::Object o = ops.Get(i).As<Napi::Object>();
    Napi::Value name = o.Get("op");
    if (!name.IsString()) throw Napi::TypeError::New(env, where + ": 'op' must be a string");
    OpInstance& op = plan->ops[i];
    op.def = FindOp(name.As<Napi::String>().Utf8Value());
    if (op.def == nullptr) throw Napi::Error::New(env, where + ": unknown op '" + name.As<Napi::String>().Utf8Value() + "'");
    Napi::Value label = o.Get("label");
    op.label = label.IsString() ? label.As<Napi::String>().Utf8Value() : "";
    where += " " + std::string(op.def->name) + (op.label.empty() ? "" : " '" + op.label + "'");
    Napi::Array ins = GetArray(env, o, "inputs", where);
    Napi::Array outs = GetArray(env, o, "outputs", where);
    if (ins.Length() < op.def->min_in || ins.Length() > op.def->max_in)
      throw Napi::Error::New(env, where + ": takes " + std::to_string(op.def->min_in) + ".." + std::to_string(op.def->max_in) +
                                      " inputs, got " + std::to_string(ins.Length()));
    if (outs.Length() != op.def->n_out)
      throw Napi::Error::New(env, where + ": takes " + std::to_string(op.def->n_out) + " outputs, got " + std::to_string(outs.Length()));
    auto read_index = [&](Napi::Value v, bool optional) -> int {
      if (!v.IsNumber()) throw Napi::TypeError::New(env, where + ": operand indices must be numbers");
      double d = v.As<Napi::Number>().DoubleValue();
      if (optional && d == -1) return -1;
      if (!(d >= 0) || d >= static_cast<double>(plan->values.size()) || static_cast<double>(static_cast<int>(d)) != d)
        throw Napi::RangeError::New(env, where + ": operand index " + std::to_string(d) + " out of range");
      return static_cast<int>(d);
    };
    for (uint32_t j = 0; j < ins.Length(); ++j) op.in.push_back(read_index(ins.Get(j), j >= op.def->min_in));
    for (uint32_t j = 0; j < outs.Length(); ++j) {
      op.out.push_back(read_index(outs.Get(j), false));
      if (plan->values[static_cast<size_t>(op.out.back())].kind == StorageKind::kConst)
        throw Napi::Error::New(env, where + ": cannot write to a constant");
    }
    Napi::Value attrs = o.Get("attrs");
    PrepareCtx ctx{plan->values, plan->consts, attrs.IsObject() ? attrs.As<Napi::Object>() : Napi::Object::New(env)};
    try {
      op.def->prepare(op, ctx);
    } catch (const std::runtime_error& e) {
      throw Napi::Error::New(env, where + ": " + e.what());
    } catch (const std::bad_alloc&) {
      throw Napi::Error::New(env, where + ": out of memory");
    }
  }
  plan_ = std::move(plan);
}

Napi::Value Plan::Run(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!plan_) throw Napi::Error::New(env, "Plan.run: plan was disposed");
  if (!info[0].IsArray()) throw Napi::TypeError::New(env, "Plan.run: bindings must be an array of Tensors");
  Napi::Array b = info[0].As<Napi::Array>();
  if (b.Length() != plan_->slot_numel.size())
    throw Napi::Error::New(env, "Plan.run: expected " + std::to_string(plan_->slot_numel.size()) + " bound tensors, got " +
                                    std::to_string(b.Length()));
  std::vector<std::shared_ptr<Storage>> slots;
  for (uint32_t i = 0; i < b.Length(); ++i) {
    Tensor* t = Tensor::FromValue(b.Get(i), "Plan.run: binding " + std::to_string(i));
    if (t->numel() != plan_->slot_numel[i])
      throw Napi::Error::New(env, "Plan.run: binding " + std::to_string(i) + " has " + std::to_string(t->numel()) +
                                      " elements, the slot needs " + std::to_string(plan_->slot_numel[i]));
    slots.push_back(t->storage());
  }
  size_t from = 0, to = plan_->ops.size();
  if (info.Length() > 1 && !info[1].IsUndefined()) from = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
  if (info.Length() > 2 && !info[2].IsUndefined()) to = static_cast<size_t>(info[2].As<Napi::Number>().Int64Value());
  if (from > to || to > plan_->ops.size())
    throw Napi::RangeError::New(env, "Plan.run: segment [" + std::to_string(from) + ", " + std::to_string(to) +
                                         ") is outside [0, " + std::to_string(plan_->ops.size()) + "]");
  auto job = std::make_unique<RunJob>(env, plan_, std::move(slots), from, to);
  Napi::Promise p = job->Promise();
  GetAddonData(env).executor->Submit(env, std::move(job));
  return p;
}

Napi::Value Plan::Dispose(const Napi::CallbackInfo& info) {
  plan_.reset();
  return info.Env().Undefined();
}

Napi::Value Plan::GetNumOps(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), plan_ ? static_cast<double>(plan_->ops.size()) : 0);
}

Napi::Value Plan::GetArenaBytes(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), plan_ ? static_cast<double>(plan_->arena_floats) * 4 : 0);
}

}  // namespace omnirx
