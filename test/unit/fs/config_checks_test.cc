// CheckBeforeScan and CheckNamedPaths: the command line's mistakes and the
// unusable paths it names, found before SOURCE is touched, each with an
// errno that says what is wrong and the message a user sees.
#include "fs/config/config_checks.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "temp_tree.h"

namespace tierfs {
namespace {

using Catch::Matchers::Contains;

Status CheckTier(const std::string& path, std::vector<std::string>* warnings = nullptr) {
  MountConfig config;
  config.tiering.dirs.push_back(DirectoryTierSpec{path, 1 << 20});
  std::vector<std::string> ignored;
  if (Status said = CheckBeforeScan(config, warnings ? warnings : &ignored); !said.ok()) {
    return said;
  }
  return CheckNamedPaths(config, warnings ? warnings : &ignored);
}

TEST_CASE("CheckBeforeScan and CheckNamedPaths refuse unusable tier directories with a reason",
          "[config_checks]") {
  testing::TempTree dir;
  dir.Mkdir("tier");
  dir.Write("file", "x");
  dir.Symlink("tier", "link");
  CHECK(CheckTier(dir.Abs("tier")).ok());

  struct Bad {
    std::string path;
    int code;
    const char* says;
  };
  for (const Bad& b : {Bad{"relative/tier", EINVAL, "is not an absolute path"},
                       Bad{dir.Abs("missing"), ENOENT, "No such file or directory"},
                       Bad{dir.Abs("file"), ENOTDIR, "is not a directory"},
                       Bad{dir.Abs("link"), ELOOP, "is a symbolic link"}}) {
    INFO(b.path);
    Status s = CheckTier(b.path);
    CHECK(s.code() == b.code);
    CHECK_THAT(s.message(), Contains(b.says) && Contains("tier '" + b.path + "'"));
  }
}

TEST_CASE("CheckBeforeScan refuses RAM budgets no machine can use, and modes without a tier",
          "[config_checks]") {
  std::vector<std::string> warnings;
  MountConfig config;
  config.tiering.ram = 100;
  Status s = CheckBeforeScan(config, &warnings);
  CHECK(s.code() == EINVAL);
  CHECK_THAT(s.message(), Contains("too small to hold a file"));
  config.tiering.ram = uint64_t{1} << 60;  // an exbibyte: more than this machine
  s = CheckBeforeScan(config, &warnings);
  CHECK(s.code() == EINVAL);
  CHECK_THAT(s.message(), Contains("more than this machine's memory"));

  MountConfig order;
  order.tiering.prefetch.mode = PrefetchMode::kOrder;
  s = CheckBeforeScan(order, &warnings);
  CHECK(s.code() == EINVAL);
  CHECK_THAT(s.message(), Contains("prefetch=order needs a tier"));

  MountConfig log;
  log.log_to = "/nonexistent-tierfs-dir/tierfs.log";
  s = CheckBeforeScan(log, &warnings);
  CHECK(s.code() == ENOENT);
  CHECK_THAT(s.message(), Contains("its directory does not exist"));
  CHECK(warnings.empty());
}

TEST_CASE("CheckBeforeScan warns of a mount with no tier, and only of that one",
          "[config_checks]") {
  std::vector<std::string> warnings;
  MountConfig mirror;
  REQUIRE(CheckBeforeScan(mirror, &warnings).ok());
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Contains("no tier (ram= or tier=)") &&
                              Contains("caches nothing beyond the kernel's page cache"));

  testing::TempTree dir;
  dir.Mkdir("tier");
  for (bool ram : {true, false}) {
    MountConfig tiered;
    if (ram) {
      tiered.tiering.ram = 1 << 20;
    } else {
      tiered.tiering.dirs.push_back(DirectoryTierSpec{dir.Abs("tier"), 1 << 20});
    }
    warnings.clear();
    REQUIRE(CheckBeforeScan(tiered, &warnings).ok());
    for (const std::string& w : warnings) CHECK_THAT(w, !Contains("no tier"));
  }
}

}  // namespace
}  // namespace tierfs
