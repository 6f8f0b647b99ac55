// core/sysinfo.h: the machine facts benchmarks print beside their figures.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace pg
