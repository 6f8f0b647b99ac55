// core/background.h: jobs run one at a time on the background thread, wait() returns after the job and rethrows
// its exception, and the task is reusable after a failed job.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "core/background.h"
#include "core/error.h"

namespace pg {
namespace {

TEST(BackgroundTask, RunsEachJobOnItsOwnThreadAndWaitSeesItsResult) {
  BackgroundTask t;
  const std::thread::id self = std::this_thread::get_id();
  int64_t sum = 0;
  std::thread::id ran_on;
  for (int64_t i = 1; i <= 100; ++i) {
    t.start([&, i] {
      sum += i;
      ran_on = std::this_thread::get_id();
    });
    t.wait();
  }
  EXPECT_EQ(sum, 5050);
  EXPECT_NE(ran_on, self);
  t.wait();  // no job: returns at once
}

TEST(BackgroundTask, RethrowsTheJobsExceptionOnceAndStaysUsable) {
  BackgroundTask t;
  t.start([] { throw IoError("test: read failed"); });
  EXPECT_THROW(t.wait(), IoError);
  t.wait();  // the error was delivered once
  std::atomic<bool> ran{false};
  t.start([&] { ran = true; });
  t.wait();
  EXPECT_TRUE(ran);
}

TEST(BackgroundTask, StartingWhileAJobRunsIsAnInternalError) {
  BackgroundTask t;
  std::atomic<bool> go{false};
  t.start([&] {
    while (!go) std::this_thread::yield();
  });
  EXPECT_THROW(t.start([] {}), InternalError);
  go = true;
  t.wait();
}

TEST(BackgroundTask, TheDestructorWaitsForARunningJob) {
  std::atomic<int> done{0};
  {
    BackgroundTask t;
    t.start([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      done = 1;
    });
  }
  EXPECT_EQ(done.load(), 1);
}

}  // namespace
}  // namespace pg
