// One fixed pool of compute threads for every kernel (two pools on two cores fight). The thread that calls
// ParallelFor takes part in the work; helpers spin briefly, then sleep on a condition variable (passive waiting).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace omnirx {

class ThreadPool {
 public:
  // `threads` counts the calling thread: 1 means no helper threads.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }

  // Calls fn(i, tid) for i in [0, n), spreading indices over the pool (dynamic: each thread takes the next
  // index). tid is in [0, threads()). Runs serially when called from inside a ParallelFor. Blocks until done.
  // Exceptions from fn are not allowed (kernels report errors before the parallel region).
  void ParallelFor(size_t n, const std::function<void(size_t, int)>& fn);

  // As ParallelFor, but runs serially on the calling thread when the whole job touches fewer than
  // kSerialFloats floats: for small elementwise ops, waking and joining the helpers costs more than the work.
  static constexpr size_t kSerialFloats = size_t{1} << 17;
  void ParallelForWork(size_t n, size_t floats, const std::function<void(size_t, int)>& fn) {
    if (floats < kSerialFloats) {
      for (size_t i = 0; i < n; ++i) fn(i, 0);
      return;
    }
    ParallelFor(n, fn);
  }

 private:
  void HelperLoop(int tid);
  void Work(int tid);

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;
  // Current job.
  const std::function<void(size_t, int)>* fn_ = nullptr;
  size_t n_ = 0;
  std::atomic<size_t> next_{0};
  std::atomic<int> active_{0};
};

// Pool shared by all kernels of this addon instance.
ThreadPool& ComputePool();
// True inside a ParallelFor body (nested calls run serially).
bool InParallelRegion();

}  // namespace omnirx
