// Tensor: a JS handle to a float32 Storage with a shape. `data` is a zero-copy Float32Array view; `dispose()`
// detaches that view and releases the storage at once (or when the last running plan that uses it finishes),
// so native memory never waits for the garbage collector.
#pragma once
#include <napi.h>

#include <memory>
#include <vector>

#include "storage.h"

namespace omnirx {

class Tensor : public Napi::ObjectWrap<Tensor> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Tensor(const Napi::CallbackInfo& info);
  ~Tensor() override;

  // Null when disposed.
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return numel_; }

  // Unwraps a JS value as a live (not disposed) Tensor or throws an Error naming `what`.
  static Tensor* FromValue(const Napi::Value& v, const std::string& what);

 private:
  struct ViewHold {
    std::shared_ptr<Storage> keep;
  };
  Napi::Value GetData(const Napi::CallbackInfo& info);
  Napi::Value GetShape(const Napi::CallbackInfo& info);
  Napi::Value GetNumel(const Napi::CallbackInfo& info);
  Napi::Value GetDisposed(const Napi::CallbackInfo& info);
  Napi::Value Dispose(const Napi::CallbackInfo& info);

  std::shared_ptr<Storage> storage_;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  Napi::Reference<Napi::ArrayBuffer> buffer_;
  ViewHold* hold_ = nullptr;  // owned by the ArrayBuffer's finalizer
};

// Parses a JS array of dims (non-negative safe integers, rank ≤ 8, ≤ 2^32 elements). Throws Napi::Error.
std::vector<int64_t> ParseShape(const Napi::Env& env, const Napi::Value& v, const std::string& what);
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace omnirx
