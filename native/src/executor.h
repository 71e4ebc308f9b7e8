// The executor: one compute thread that runs queued jobs (plan segments) in FIFO order, each using the shared
// compute pool, and hands completions back to the JS thread through a thread-safe function. Jobs never touch V8
// while executing (sharp's baton rule); the JS thread resolves or rejects their promises.
#pragma once
#include <napi.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace omnirx {

class Job {
 public:
  virtual ~Job() = default;
  // Runs on the compute thread. Throw std::exception to fail the job.
  virtual void Execute() = 0;
  // Runs on the JS thread after Execute: resolves (error empty) or rejects.
  virtual void Complete(Napi::Env env, const std::string& error) = 0;
  std::string error;
};

class Executor {
 public:
  explicit Executor(Napi::Env env);
  ~Executor();
  // Stops taking jobs. Returns true when the compute thread was still running a job and was detached: the caller
  // must then keep this object alive (leak it), since that thread still uses it.
  bool Shutdown();
  // JS thread only.
  void Submit(Napi::Env env, std::unique_ptr<Job> job);
  int64_t queued() const { return queued_.load(); }
  int64_t running() const { return running_.load(); }
  int64_t completed() const { return completed_.load(); }

 private:
  void Loop();
  static void OnDone(Napi::Env env, Napi::Function, Executor* self, Job* job);

  using Tsfn = Napi::TypedThreadSafeFunction<Executor, Job, &Executor::OnDone>;
  Tsfn tsfn_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> queue_;
  bool stop_ = false;
  int pending_ = 0;  // JS thread only: submitted and not yet completed
  std::atomic<int64_t> queued_{0}, running_{0}, completed_{0};
};

}  // namespace omnirx
