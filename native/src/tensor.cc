#include "tensor.h"

#include "addon.h"

#include <cmath>
#include <sstream>

namespace omnirx {

namespace {
constexpr int64_t kMaxElements = int64_t{1} << 32;  // 16 GiB of float32
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

std::vector<int64_t> ParseShape(const Napi::Env& env, const Napi::Value& v, const std::string& what) {
  if (!v.IsArray()) throw Napi::TypeError::New(env, what + ": shape must be an array of integers");
  Napi::Array arr = v.As<Napi::Array>();
  if (arr.Length() > 8) throw Napi::RangeError::New(env, what + ": rank " + std::to_string(arr.Length()) + " exceeds 8");
  std::vector<int64_t> shape;
  int64_t numel = 1;
  for (uint32_t i = 0; i < arr.Length(); ++i) {
    Napi::Value d = arr.Get(i);
    if (!d.IsNumber()) throw Napi::TypeError::New(env, what + ": dim " + std::to_string(i) + " is not a number");
    double x = d.As<Napi::Number>().DoubleValue();
    if (!std::isfinite(x) || x < 0 || std::floor(x) != x || x > static_cast<double>(kMaxElements))
      throw Napi::RangeError::New(env, what + ": dim " + std::to_string(i) + " must be a non-negative integer");
    shape.push_back(static_cast<int64_t>(x));
    numel *= static_cast<int64_t>(x);
    if (numel > kMaxElements)
      throw Napi::RangeError::New(env, what + ": shape has more than 2^32 elements");
  }
  return shape;
}

Napi::Function Tensor::Init(Napi::Env env) {
  return DefineClass(env, "Tensor",
                     {
                         InstanceAccessor<&Tensor::GetData>("data"),
                         InstanceAccessor<&Tensor::GetShape>("shape"),
                         InstanceAccessor<&Tensor::GetNumel>("numel"),
                         InstanceAccessor<&Tensor::GetDisposed>("disposed"),
                         InstanceMethod<&Tensor::Dispose>("dispose"),
                     });
}

Tensor::Tensor(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Tensor>(info) {
  Napi::Env env = info.Env();
  shape_ = ParseShape(env, info[0], "Tensor");
  numel_ = 1;
  for (int64_t d : shape_) numel_ *= d;
  try {
    storage_ = Storage::Allocate(static_cast<size_t>(numel_));
  } catch (const std::bad_alloc&) {
    throw Napi::Error::New(env, "Tensor: out of memory allocating " + std::to_string(numel_ * 4) + " bytes for shape " +
                                    ShapeString(shape_));
  }
}

Tensor::~Tensor() {
  // The ArrayBuffer (if any) keeps the storage alive through its ViewHold until it is collected.
  buffer_.Reset();
}

Tensor* Tensor::FromValue(const Napi::Value& v, const std::string& what) {
  Napi::Env env = v.Env();
  if (!v.IsObject() || !v.As<Napi::Object>().InstanceOf(GetAddonData(env).tensor_ctor.Value()))
    throw Napi::TypeError::New(env, what + " is not a Tensor");
  void* raw = nullptr;
  if (napi_unwrap(env, v, &raw) != napi_ok || raw == nullptr) {
    // An object that inherits from Tensor.prototype but was not made by the constructor.
    napi_value ignored;
    napi_get_and_clear_last_exception(env, &ignored);
    throw Napi::TypeError::New(env, what + " is not a Tensor (not created by the Tensor constructor)");
  }
  Tensor* t = static_cast<Tensor*>(static_cast<Napi::ObjectWrap<Tensor>*>(raw));
  if (!t->storage_) throw Napi::Error::New(env, what + " was disposed");
  return t;
}

Napi::Value Tensor::GetData(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!storage_) throw Napi::Error::New(env, "Tensor.data: tensor was disposed");
  if (buffer_.IsEmpty()) {
    hold_ = new ViewHold{storage_};
    Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(
        env, storage_->data, static_cast<size_t>(numel_) * sizeof(float),
        [](Napi::Env, void*, ViewHold* hold) { delete hold; }, hold_);
    buffer_ = Napi::Persistent(ab);
  }
  return Napi::Float32Array::New(env, static_cast<size_t>(numel_), buffer_.Value(), 0);
}

Napi::Value Tensor::GetShape(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array a = Napi::Array::New(env, shape_.size());
  for (size_t i = 0; i < shape_.size(); ++i) a.Set(static_cast<uint32_t>(i), Napi::Number::New(env, static_cast<double>(shape_[i])));
  return a;
}

Napi::Value Tensor::GetNumel(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(numel_)); }

Napi::Value Tensor::GetDisposed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), !storage_); }

Napi::Value Tensor::Dispose(const Napi::CallbackInfo& info) {
  if (!buffer_.IsEmpty()) {
    buffer_.Value().Detach();
    hold_->keep.reset();
    hold_ = nullptr;
    buffer_.Reset();
  }
  storage_.reset();
  return info.Env().Undefined();
}

}  // namespace omnirx
