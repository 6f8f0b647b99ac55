// core/sysinfo.h: the machine facts benchmarks print beside their figures.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "core/sysinfo.h"

namespace pg {
namespace {

TEST(SysInfo, AvailableMemoryIsPositive) { EXPECT_GT(available_memory_bytes(), int64_t{1} << 20); }

TEST(SysInfo, DescribeDiskNamesTheDeviceOrTheFileSystem) {
  // A folder on a block device names it (/dev/...) with the file system; a pseudo file system names itself.
  const std::string root = describe_disk("/");
  EXPECT_FALSE(root.empty());
  EXPECT_NE(root, "unknown");
  const std::string proc = describe_disk("/proc/self");
  EXPECT_EQ(proc.rfind("proc", 0), 0u) << proc;
  // A path that does not exist is described by the mount that would hold it.
  const std::string missing = describe_disk("/proc/no-such-entry-here");
  EXPECT_EQ(missing.rfind("proc", 0), 0u) << missing;
}

TEST(SysInfo, RunInBackgroundLowersThePriorityOfTheProcessAndItsChildren) {
  // In a child process that leads a session of its own (the test runner and its session keep their priority): nice 7,
  // inherited by a grandchild; where the kernel groups by session, the autogroup's nice too. A process that does not
  // lead its session leaves the session's autogroup alone (checked in the first child, before setsid).
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string ag0;
    {
      std::ifstream f("/proc/self/autogroup");
      std::getline(f, ag0);
    }
    const std::string shared = run_in_background(3);
    std::string ag1;
    {
      std::ifstream f("/proc/self/autogroup");
      std::getline(f, ag1);
    }
    if (ag1 != ag0) _exit(2);  // the caller's session was changed
    std::string enabled;
    std::ifstream("/proc/sys/kernel/sched_autogroup_enabled") >> enabled;
    if (enabled == "1" && shared.find("setsid") == std::string::npos) _exit(3);
    if (setsid() < 0) _exit(4);
    const std::string what = run_in_background(7);
    int ok = what.rfind("nice 7", 0) == 0 && getpriority(PRIO_PROCESS, 0) == 7;
    if (enabled == "1") {
      std::ifstream ag("/proc/self/autogroup");
      std::string line;
      std::getline(ag, line);
      ok = ok && line.find("nice 7") != std::string::npos && what.find("autogroup nice 7") != std::string::npos;
    }
    const pid_t g = fork();
    if (g == 0) _exit(getpriority(PRIO_PROCESS, 0) == 7 ? 0 : 1);
    int st = 0;
    waitpid(g, &st, 0);
    _exit(ok && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace pg
