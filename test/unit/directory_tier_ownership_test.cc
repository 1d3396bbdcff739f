// OpenDirectoryTier refuses a tier directory another user could have planted
// or could swap: a symlink, one owned by someone else, one others may write,
// or one below a directory others may write without the sticky bit
// (regression: issue 11 item 1, a squatted /tmp/tierfs-<job id>).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "temp_tree.h"
#include "tiering/store/tier.h"

namespace tierfs {
namespace {

using testing::TempTree;

constexpr uid_t kNobody = 65534;

// The error of opening `path` as a tier ("" if it opened).
std::string OpenError(const std::string& path) {
  std::string error;
  auto tier = OpenDirectoryTier("nvme", path, 1 << 20, false, &error);
  if (tier != nullptr) return "";
  CHECK_FALSE(error.empty());
  return error;
}

TEST_CASE("OpenDirectoryTier takes its own directory below a sticky /tmp", "[directory_tier]") {
  TempTree dir;
  dir.Mkdir("tier");
  CHECK(OpenError(dir.Abs("tier")) == "");
  CHECK(OpenError(dir.Abs("tier") + "/") == "");
  REQUIRE(::chmod(dir.root().c_str(), 01777) == 0);  // like /tmp
  CHECK(OpenError(dir.Abs("tier")) == "");
}

TEST_CASE("OpenDirectoryTier refuses a symlink to a tier directory", "[directory_tier]") {
  TempTree dir;
  dir.Mkdir("real");
  dir.Symlink(dir.Abs("real"), "link");
  CHECK_THAT(OpenError(dir.Abs("link")), Catch::Contains("symbolic link"));
  CHECK_THAT(OpenError(dir.Abs("link") + "/"), Catch::Contains("symbolic link"));
}

TEST_CASE("OpenDirectoryTier refuses a tier others may write", "[directory_tier]") {
  TempTree dir;
  dir.Mkdir("tier");
  for (mode_t mode : {0770, 0707, 0777, 01777}) {
    REQUIRE(::chmod(dir.Abs("tier").c_str(), mode) == 0);
    CHECK_THAT(OpenError(dir.Abs("tier")), Catch::Contains("refused") && Catch::Contains("write"));
  }
}

TEST_CASE("OpenDirectoryTier refuses a tier below a directory others may write",
          "[directory_tier]") {
  TempTree dir;
  dir.Mkdir("shared");
  dir.Mkdir("shared/tier");
  REQUIRE(::chmod(dir.Abs("shared").c_str(), 0777) == 0);  // anyone may rename tier away
  CHECK_THAT(OpenError(dir.Abs("shared/tier")),
             Catch::Contains(dir.Abs("shared")) && Catch::Contains("without the sticky bit"));
  REQUIRE(::chmod(dir.Abs("shared").c_str(), 01777) == 0);
  CHECK(OpenError(dir.Abs("shared/tier")) == "");
}

TEST_CASE("OpenDirectoryTier refuses a tier another user owns or could replace",
          "[directory_tier]") {
  if (::geteuid() != 0) {
    WARN("skipped: needs root to give a directory to another user");
    return;
  }
  TempTree dir;
  dir.Mkdir("planted");
  dir.Write("planted/journal", "");
  REQUIRE(::chmod(dir.Abs("planted").c_str(), 0700) == 0);
  REQUIRE(::chown(dir.Abs("planted").c_str(), kNobody, kNobody) == 0);
  CHECK_THAT(OpenError(dir.Abs("planted")), Catch::Contains("owned by uid 65534"));

  dir.Mkdir("theirs");
  dir.Mkdir("theirs/tier");
  REQUIRE(::chown(dir.Abs("theirs").c_str(), kNobody, kNobody) == 0);
  CHECK_THAT(OpenError(dir.Abs("theirs/tier")),
             Catch::Contains(dir.Abs("theirs")) && Catch::Contains("owned by uid 65534"));
}

}  // namespace
}  // namespace tierfs
