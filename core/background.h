// One job at a time on a thread of its own, for work that waits (the table reads of generation: infer/engine.h
// starts them, computes what does not need the rows, then waits). The thread is made once and kept: starting a
// job is a lock and a notify, no thread creation on the hot path.
//
//   BackgroundTask io;
//   io.start([&] { source->fetch(addresses, rows); });
//   ...                                   // other work
//   io.wait();                            // the job's exception, if any, is rethrown here
//
// The job must not use OpenMP (it would start a second team beside the caller's). The destructor waits for a
// running job (its exception is dropped).
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace pg {

class BackgroundTask {
 public:
  BackgroundTask();
  ~BackgroundTask();
  BackgroundTask(const BackgroundTask&) = delete;
  BackgroundTask& operator=(const BackgroundTask&) = delete;

  // Runs job on the background thread. A job must not be running (wait() first).
  void start(std::function<void()> job);
  // Blocks until the job has finished; rethrows its exception. Returns at once when no job runs.
  void wait();
  // Seconds the last wait() blocked.
  double last_wait_seconds() const { return waited_; }

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool pending_ = false, running_ = false, quit_ = false;
  std::exception_ptr error_;
  double waited_ = 0;
  std::thread thread_;
};

}  // namespace pg
