// The revision recorded in logs and checkpoints is generated at build time (cmake/revision.cmake).
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "core/build_info.h"

namespace pg {
namespace {

TEST(BuildInfo, RevisionIsAGitHashOrUnknown) {
  const std::string rev = build::kRevision;
  EXPECT_TRUE(std::regex_match(rev, std::regex("[0-9a-f]{12}(-dirty)?|unknown"))) << rev;
  EXPECT_FALSE(std::string(build::kBuildType).empty());
}

}  // namespace
}  // namespace pg
