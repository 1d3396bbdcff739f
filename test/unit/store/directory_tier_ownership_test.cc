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

// How opening `path` as a tier fails (ok if it opened).
Status OpenError(const std::string& path) {
  return OpenDirectoryTier("nvme", path, 1 << 20, false).status();
}

TEST_CASE("OpenDirectoryTier takes its own directory below a sticky /tmp", "[directory_tier]") {
  TempTree dir;
  dir.Mkdir("tier");
  CHECK(OpenError(dir.Abs("tier")).ok());
  CHECK(OpenError(dir.Abs("tier") + "/").ok());
  REQUIRE(::chmod(dir.root().c_str(), 01777) == 0);  // like /tmp
  CHECK(OpenError(dir.Abs("tier")).ok());
}

TEST_CASE("OpenDirectoryTier refuses a symlink to a tier directory", "[directory_tier]") {
  TempTree dir;
  dir.Mkdir("real");
  dir.Symlink(dir.Abs("real"), "link");
  for (const std::string& link : {dir.Abs("link"), dir.Abs("link") + "/"}) {
    Status refused = OpenError(link);
    CHECK_THAT(refused.message(), Catch::Contains("symbolic link"));
    CHECK(refused.code() == ELOOP);
  }
}

TEST_CASE("OpenDirectoryTier refuses a tier others may write", "[directory_tier]") {
  TempTree dir;
  dir.Mkdir("tier");
  for (mode_t mode : {0770, 0707, 0777, 01777}) {
    REQUIRE(::chmod(dir.Abs("tier").c_str(), mode) == 0);
    Status refused = OpenError(dir.Abs("tier"));
    CHECK_THAT(refused.message(), Catch::Contains("refused") && Catch::Contains("write"));
    CHECK(refused.code() == EACCES);
  }
}

TEST_CASE("OpenDirectoryTier refuses a tier below a directory others may write",
          "[directory_tier]") {
  TempTree dir;
  dir.Mkdir("shared");
  dir.Mkdir("shared/tier");
  REQUIRE(::chmod(dir.Abs("shared").c_str(), 0777) == 0);  // anyone may rename tier away
  Status refused = OpenError(dir.Abs("shared/tier"));
  CHECK_THAT(refused.message(),
             Catch::Contains(dir.Abs("shared")) && Catch::Contains("without the sticky bit"));
  CHECK(refused.code() == EACCES);
  REQUIRE(::chmod(dir.Abs("shared").c_str(), 01777) == 0);
  CHECK(OpenError(dir.Abs("shared/tier")).ok());
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
  Status planted = OpenError(dir.Abs("planted"));
  CHECK_THAT(planted.message(), Catch::Contains("owned by uid 65534"));
  CHECK(planted.code() == EACCES);

  dir.Mkdir("theirs");
  dir.Mkdir("theirs/tier");
  REQUIRE(::chown(dir.Abs("theirs").c_str(), kNobody, kNobody) == 0);
  Status theirs = OpenError(dir.Abs("theirs/tier"));
  CHECK_THAT(theirs.message(),
             Catch::Contains(dir.Abs("theirs")) && Catch::Contains("owned by uid 65534"));
  CHECK(theirs.code() == EACCES);
}

}  // namespace
}  // namespace tierfs
