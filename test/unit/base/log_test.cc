// Log's cap on a log file: a user who makes the daemon log cannot fill the
// file system the log is on.
#include "tiering/base/log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tiering/base/log_cap.h"

namespace tierfs {
namespace {

TEST_CASE("A log file stops at its cap, says so once and counts the lines dropped", "[log]") {
  char dir[] = "/tmp/tierfs-log-test-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string path = std::string(dir) + "/tierfs.log";
  REQUIRE(Log::UseFile(path) == 0);
  SetLogFileCap(4096);
  const uint64_t before = LogDroppedLines();
  for (int i = 0; i < 1000; ++i) Log::Write(kWarning, "a line a user caused, again and again");
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK(st.st_size <= 4096);
  CHECK(st.st_size > 4096 - 400);
  const uint64_t dropped = LogDroppedLines() - before;
  CHECK(dropped > 900);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  CHECK(all.find("the log reached its cap (log_max=4096 bytes)") != std::string::npos);
  CHECK(all.find("reached its cap") == all.rfind("reached its cap"));  // said once
  SetLogFileCap(0);
  REQUIRE(Log::UseFile("/dev/null") == 0);  // the runner's later lines
  ::unlink(path.c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace tierfs
