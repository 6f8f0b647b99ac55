// Implementation of core/background.h.
#include "core/background.h"

#include "core/error.h"
#include <utility>

#include "core/timer.h"

namespace pg {

BackgroundTask::BackgroundTask() : thread_([this] { loop(); }) {}

BackgroundTask::~BackgroundTask() {
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !pending_ && !running_; });
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackgroundTask::start(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    PG_CHECK(!pending_ && !running_, "BackgroundTask::start: a job is still running (wait() first)");
    job_ = std::move(job);
    error_ = nullptr;
    pending_ = true;
  }
  cv_.notify_all();
}

void BackgroundTask::wait() {
  const Timer t;
  std::exception_ptr e;
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !pending_ && !running_; });
    e = std::exchange(error_, nullptr);
  }
  waited_ = t.seconds();
  if (e) std::rethrow_exception(e);
}

void BackgroundTask::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return pending_ || quit_; });
    if (!pending_) return;  // quit, nothing left to run
    std::function<void()> job = std::move(job_);
    pending_ = false;
    running_ = true;
    lk.unlock();
    std::exception_ptr e;
    try {
      job();
    } catch (...) {
      e = std::current_exception();
    }
    lk.lock();
    error_ = e;
    running_ = false;
    cv_.notify_all();
  }
}

}  // namespace pg
