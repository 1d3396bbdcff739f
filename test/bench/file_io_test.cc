// The loader's file access: listing skips control directories, whole-file
// reads return sizes or -errno, counters parse pfs-sim's JSON, options.
#include "file_io.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "bench_options.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using bench_test::TempDir;

TEST_CASE("listing finds regular files and skips dot entries", "[bench][io]") {
  TempDir dir;
  dir.Write("b/2.jpg", 10);
  dir.Write("a/1.jpg", 10);
  dir.Write(".pfs-sim/stats", 10);
  dir.Write("a/.hidden", 10);
  const auto files = bench::ListFiles(dir.path.string());
  REQUIRE(files.size() == 2);
  CHECK(files[0] == (dir.path / "a/1.jpg").string());
  CHECK(files[1] == (dir.path / "b/2.jpg").string());
  CHECK_THROWS_WITH(bench::ListFiles("/nonexistent-bench-dir"), Catch::Contains("cannot list"));
}

TEST_CASE("whole-file reads return the size or -errno", "[bench][io]") {
  TempDir dir;
  dir.Write("f", 3 * 4096 + 5);
  CHECK(bench::ReadWholeFile((dir.path / "f").string(), 4096) == 3 * 4096 + 5);
  CHECK(bench::ReadWholeFile((dir.path / "f").string(), 1 << 20) == 3 * 4096 + 5);
  CHECK(bench::ReadWholeFile((dir.path / "missing").string(), 4096) == -ENOENT);
}

TEST_CASE("pfs-sim counters parse and subtract", "[bench][io]") {
  TempDir dir;
  std::ofstream(dir.path / "stats")
      << R"({"params": {"meta_ms": 1, "fail_files": ["a:b"], "seed": 1}, )"
      << R"("ops": {"meta_ops": 30, "reads": 40, "read_bytes": 5000000}})";
  const auto after = bench::ReadCounters((dir.path / "stats").string());
  CHECK(after.at("meta_ops") == 30);
  CHECK(after.at("read_bytes") == 5000000);
  CHECK(after.count("seed") == 0);  // params are not counters
  const auto delta = bench::CounterDelta({{"meta_ops", 10}, {"reads", 40}}, after);
  CHECK(delta.at("meta_ops") == 20);
  CHECK(delta.at("reads") == 0);
  CHECK(bench::ReadCounters((dir.path / "missing").string()).empty());
}

TEST_CASE("options parse and reject bad input", "[bench][options]") {
  bench::BenchOptions o;
  const char* good[] = {"tierfs-bench", "/data", "--workers",    "8",
                        "--block",      "256K",  "--compute-ms", "2.5"};
  CHECK(bench::ParseOptions(8, const_cast<char**>(good), o).empty());
  CHECK(o.root == "/data");
  CHECK(o.epoch.workers == 8);
  CHECK(o.block == 256 * 1024);
  CHECK(o.epoch.compute_ms == 2.5);
  for (const char* bad : {"--workers=0", "--epochs", "--bogus"}) {
    bench::BenchOptions b;
    const char* argv[] = {"tierfs-bench", "/data", bad, "0"};
    CHECK_FALSE(bench::ParseOptions(4, const_cast<char**>(argv), b).empty());
  }
  bench::BenchOptions none;
  const char* argv[] = {"tierfs-bench"};
  CHECK_THAT(bench::ParseOptions(1, const_cast<char**>(argv), none), Catch::Contains("ROOT"));
}
