// Native float32 buffers: allocated once, 64-byte aligned (2 MiB aligned with transparent huge pages for large
// ones, since first touch of fresh memory is very slow on the target VMs), counted in process-wide statistics so
// tests can check that every byte comes back.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace omnirx {

struct PackedB;

struct Storage {
  float* data = nullptr;
  size_t numel = 0;
  // Weight packing for the GEMM micro-kernel, built on first use by a plan and freed with the storage: one slot for
  // the float32 path (nn.Linear or conv order) and one for the bf16 path, so plans of both dtypes share a weight
  // without repacking it.
  std::mutex pack_mutex;
  std::shared_ptr<const PackedB> packed;
  std::shared_ptr<const PackedB> packed_bf16;

  // Allocates `numel` floats, zero-filled. Throws std::bad_alloc.
  static std::shared_ptr<Storage> Allocate(size_t numel);
  ~Storage();
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct MemoryStats {
  // Tensors, packed weights, plan arenas and op scratch: what requests and models own.
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> buffers{0};
  // Per-thread kernel scratch (grows to the largest shape a thread has seen, then stays): reported apart so that
  // "every byte came back" checks do not depend on which pool thread happened to run a kernel first.
  std::atomic<int64_t> scratch_bytes{0};
};
MemoryStats& GlobalMemoryStats();

// Raw aligned allocation for scratch and arenas (also counted). Free with FreeAligned.
float* AllocAligned(size_t numel, size_t* bytes_out, bool scratch = false);
void FreeAligned(float* p, size_t bytes, bool scratch = false);

// A growable per-thread scratch buffer (declare it thread_local): reallocated only when a larger size is asked
// for, so steady-state kernels never touch fresh memory.
struct ScratchBuffer {
  float* data = nullptr;
  size_t bytes = 0;
  size_t cap = 0;
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { FreeAligned(data, bytes, true); }
  float* Get(size_t numel) {
    if (numel > cap) {
      FreeAligned(data, bytes, true);
      data = AllocAligned(numel, &bytes, true);
      cap = numel;
    }
    return data;
  }
};

}  // namespace omnirx
