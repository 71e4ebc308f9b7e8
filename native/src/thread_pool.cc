#include "thread_pool.h"

#include <cstdlib>
#include <string>

namespace omnirx {

namespace {
thread_local bool tl_in_parallel = false;

int ConfiguredThreads() {
  if (const char* env = std::getenv("OMNIRX_THREADS")) {
    int n = std::atoi(env);
    if (n >= 1 && n <= 256) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}
}  // namespace

bool InParallelRegion() { return tl_in_parallel; }

ThreadPool& ComputePool() {
  // Never destroyed: at process exit a helper may still be inside a long kernel, and joining it would hold the
  // exit (and a second Ctrl-C) until that kernel ends.
  static ThreadPool* pool = new ThreadPool(ConfiguredThreads());
  return *pool;
}

ThreadPool::ThreadPool(int threads) {
  for (int t = 1; t < threads; ++t) helpers_.emplace_back([this, t] { HelperLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : helpers_) t.join();
}

void ThreadPool::Work(int tid) {
  tl_in_parallel = true;
  for (;;) {
    size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= n_) break;
    (*fn_)(i, tid);
  }
  tl_in_parallel = false;
}

void ThreadPool::HelperLoop(int tid) {
  uint64_t seen = 0;
  for (;;) {
    // Spin a little for back-to-back kernels, then sleep.
    bool got = false;
    for (int spin = 0; spin < 4000; ++spin) {
      if (generation_.load(std::memory_order_acquire) != seen) {
        got = true;
        break;
      }
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    if (!got) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
    }
    Work(tid);
    active_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t, int)>& fn) {
  if (n == 0) return;
  if (helpers_.empty() || n == 1 || tl_in_parallel) {
    bool was = tl_in_parallel;
    tl_in_parallel = true;
    for (size_t i = 0; i < n; ++i) fn(i, 0);
    tl_in_parallel = was;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    next_.store(0, std::memory_order_relaxed);
    active_.store(static_cast<int>(helpers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  Work(0);
  // Wait for the helpers: spin briefly (they are usually done), then yield the core, so that an oversubscribed
  // machine (other processes, test runners in parallel) does not burn whole time slices spinning.
  for (int spin = 0; active_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < 2000) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
  fn_ = nullptr;
}

}  // namespace omnirx
