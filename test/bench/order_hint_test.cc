// tierfs-bench --hint-order: an epoch's order goes to ROOT/.tierfs/order as
// paths relative to ROOT, one per line, appended in one write; without the
// control file the loader warns, creates nothing and stops trying.
#include "order_hint.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "epoch_order.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using bench_test::TempDir;

namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("the declared order is the epoch order, relative to the root, appended",
          "[bench][hint]") {
  TempDir dir;
  fs::create_directories(dir.path / ".tierfs");
  std::ofstream(dir.path / ".tierfs/order") << "kept/from-before\n";
  const std::string root = dir.path.string();
  const std::vector<std::string> files = {root + "/a/1.jpg", root + "/a/2.jpg", root + "/b/3.jpg",
                                          root + "/c d/4.jpg"};
  bench::OrderHint hint(root + "/");  // a trailing slash changes nothing
  const std::vector<size_t> epoch1 = bench::EpochOrder(files.size(), 7, 1);
  const std::vector<size_t> epoch2 = bench::EpochOrder(files.size(), 7, 2);
  REQUIRE(hint.Declare(files, epoch1) == 4);
  REQUIRE(hint.Declare(files, epoch2) == 4);

  const std::string text = dir.Read(".tierfs/order");
  REQUIRE(text.back() == '\n');
  const std::vector<std::string> lines = Lines(text);
  REQUIRE(lines.size() == 11);
  CHECK(lines[0] == "kept/from-before");  // appended, not truncated
  CHECK(lines[1] == "//epoch");           // each epoch is marked, as the Python helper does
  CHECK(lines[6] == "//epoch");
  for (size_t i = 0; i < 4; ++i) {
    CHECK(root + "/" + lines[2 + i] == files[epoch1[i]]);
    CHECK(root + "/" + lines[7 + i] == files[epoch2[i]]);
  }
  CHECK(std::vector<std::string>(lines.begin() + 2, lines.begin() + 6) !=
        std::vector<std::string>(lines.begin() + 7, lines.end()));
  CHECK(lines[2].find(root) == std::string::npos);
}

TEST_CASE("without .tierfs/order the hint warns, creates nothing and gives up", "[bench][hint]") {
  TempDir dir;
  const std::string root = dir.path.string();
  const std::vector<std::string> files = {root + "/x"};
  bench::OrderHint hint(root);
  CHECK(hint.Declare(files, {0}) == -1);
  CHECK(hint.disabled());
  CHECK_FALSE(fs::exists(dir.path / ".tierfs"));
  fs::create_directories(dir.path / ".tierfs");
  std::ofstream(dir.path / ".tierfs/order").flush();
  CHECK(hint.Declare(files, {0}) == -1);  // stopped trying
  CHECK(dir.Read(".tierfs/order").empty());
}

TEST_CASE("a failing write is reported and retried next epoch", "[bench][hint]") {
  TempDir dir;
  fs::create_directories(dir.path / ".tierfs/order");  // a directory: open fails with EISDIR
  const std::string root = dir.path.string();
  const std::vector<std::string> files = {root + "/x"};
  bench::OrderHint hint(root);
  CHECK(hint.Declare(files, {0}) == -1);
  CHECK_FALSE(hint.disabled());
  fs::remove(dir.path / ".tierfs/order");
  std::ofstream(dir.path / ".tierfs/order").flush();
  CHECK(hint.Declare(files, {0}) == 1);
  CHECK(dir.Read(".tierfs/order") == "//epoch\nx\n");
}
