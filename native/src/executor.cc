#include "executor.h"

#include "thread_pool.h"

namespace omnirx {

Executor::Executor(Napi::Env env) {
  tsfn_ = Tsfn::New(env, "omnirx.executor", 0, 1, this);
  tsfn_.Unref(env);
  thread_ = std::thread([this] { Loop(); });
}

bool Executor::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  bool detached = false;
  // A job may be in the middle of a long plan: do not hold the environment's teardown (process exit) for it. The
  // thread finishes that job against memory it co-owns, finds the thread-safe function aborted, and returns.
  if (thread_.joinable()) {
    if (running_.load() == 0) {
      thread_.join();
    } else {
      thread_.detach();
      detached = true;
    }
  }
  tsfn_.Abort();
  return detached;
}

Executor::~Executor() {
  if (thread_.joinable()) Shutdown();
}

void Executor::Submit(Napi::Env env, std::unique_ptr<Job> job) {
  if (pending_++ == 0) tsfn_.Ref(env);
  queued_ += 1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void Executor::Loop() {
  ComputePool();  // start helper threads before the first job
  for (;;) {
    std::unique_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    queued_ -= 1;
    running_ += 1;
    try {
      job->Execute();
    } catch (const std::bad_alloc&) {
      job->error = "out of memory";
    } catch (const std::exception& e) {
      job->error = e.what();
    }
    running_ -= 1;
    completed_ += 1;
    Job* raw = job.release();
    if (tsfn_.BlockingCall(raw) != napi_ok) delete raw;  // environment shutting down
  }
}

void Executor::OnDone(Napi::Env env, Napi::Function, Executor* self, Job* job) {
  std::unique_ptr<Job> owned(job);
  if (env != nullptr) owned->Complete(env, owned->error);
  if (--self->pending_ == 0 && env != nullptr) self->tsfn_.Unref(env);
}

}  // namespace omnirx
