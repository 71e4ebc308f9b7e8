#include "storage.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace omnirx {

MemoryStats& GlobalMemoryStats() {
  static MemoryStats stats;
  return stats;
}

float* AllocAligned(size_t numel, size_t* bytes_out, bool scratch) {
  constexpr size_t kHuge = 2u << 20;
  size_t bytes = numel * sizeof(float);
  if (bytes == 0) bytes = 64;
  size_t align = bytes >= kHuge ? kHuge : 64;
  bytes = (bytes + align - 1) / align * align;
  void* p = nullptr;
  if (posix_memalign(&p, align, bytes) != 0 || p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (align == kHuge) madvise(p, bytes, MADV_HUGEPAGE);
#endif
  std::memset(p, 0, bytes);
  if (scratch) {
    GlobalMemoryStats().scratch_bytes += static_cast<int64_t>(bytes);
  } else {
    GlobalMemoryStats().bytes += static_cast<int64_t>(bytes);
    GlobalMemoryStats().buffers += 1;
  }
  *bytes_out = bytes;
  return static_cast<float*>(p);
}

void FreeAligned(float* p, size_t bytes, bool scratch) {
  if (p == nullptr) return;
  std::free(p);
  if (scratch) {
    GlobalMemoryStats().scratch_bytes -= static_cast<int64_t>(bytes);
  } else {
    GlobalMemoryStats().bytes -= static_cast<int64_t>(bytes);
    GlobalMemoryStats().buffers -= 1;
  }
}

namespace {
struct AllocatedStorage : Storage {
  size_t bytes = 0;
  ~AllocatedStorage() { FreeAligned(data, bytes); }
};
}  // namespace

std::shared_ptr<Storage> Storage::Allocate(size_t numel) {
  auto s = std::make_shared<AllocatedStorage>();
  s->data = AllocAligned(numel, &s->bytes);
  s->numel = numel;
  return s;
}

Storage::~Storage() = default;

}  // namespace omnirx
