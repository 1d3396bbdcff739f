// The epoch runner with a fake reader: every file read exactly once by N
// workers, errors and bytes counted, workers bounded, trainer compute paced.
#include "epoch_runner.h"

#include <fmt/format.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "epoch_order.h"

using bench::EpochConfig;
using bench::RunEpoch;

namespace {

std::vector<std::string> Names(size_t n) {
  std::vector<std::string> files;
  for (size_t i = 0; i < n; ++i) files.push_back(fmt::format("f{}", i));
  return files;
}

}  // namespace

TEST_CASE("an epoch reads every file exactly once", "[bench][runner]") {
  const std::vector<std::string> files = Names(1000);
  std::mutex mu;
  std::multiset<std::string> seen;
  std::atomic<int> active{0}, most_active{0};
  EpochConfig config;
  config.workers = 4;
  config.batch = 7;  // 1000 is not a multiple: the last batch is short
  const auto result =
      RunEpoch(files, bench::EpochOrder(files.size(), 3, 1), config,
               [&](const std::string& path) -> int64_t {
                 const int now = ++active;
                 int prev = most_active.load();
                 while (now > prev && !most_active.compare_exchange_weak(prev, now)) {
                 }
                 {
                   std::lock_guard<std::mutex> lock(mu);
                   seen.insert(path);
                 }
                 --active;
                 return path == "f13" ? -EIO : 10;
               });
  CHECK(seen.size() == 1000);
  CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == 1000);
  for (uint32_t reads : result.reads_per_file) REQUIRE(reads == 1);
  CHECK(result.files_ok == 999);
  CHECK(result.errors == 1);
  CHECK(result.bytes == 9990);
  CHECK(result.latencies_ns.size() == 1000);
  CHECK(most_active.load() <= 4);
}

TEST_CASE("the trainer spends compute time per batch", "[bench][runner]") {
  EpochConfig config;
  config.workers = 2;
  config.batch = 10;
  config.compute_ms = 20;
  const std::vector<std::string> files = Names(50);  // 5 batches -> >= 100 ms
  const auto result = RunEpoch(files, bench::EpochOrder(files.size(), 1, 1), config,
                               [](const std::string&) -> int64_t { return 1; });
  CHECK(result.wall_s >= 0.1);
  CHECK(result.wall_s < 5);  // generous: a loaded box, but no hang
}

TEST_CASE("workers stay within the prefetch depth", "[bench][runner]") {
  EpochConfig config;
  config.workers = 4;
  config.batch = 1;
  config.prefetch_batches = 2;
  config.compute_ms = 5;
  std::atomic<int> reads{0};
  const auto start = std::chrono::steady_clock::now();
  std::atomic<bool> ahead{false};
  const std::vector<std::string> files = Names(20);
  RunEpoch(files, bench::EpochOrder(files.size(), 1, 1), config,
           [&](const std::string&) -> int64_t {
             // Batch k may start only after k - 2 batches were consumed (5 ms each).
             const int k = reads++;
             const double ms =
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count();
             if (k >= 6 && ms < (k - 2) * 5.0 * 0.8) ahead = true;
             return 1;
           });
  CHECK_FALSE(ahead.load());
}

TEST_CASE("quantiles of latencies", "[bench][runner]") {
  std::vector<int64_t> ns;
  for (int i = 1; i <= 100; ++i) ns.push_back(i * 1000000);
  CHECK(bench::QuantileMs(ns, 0.5) == Approx(51));
  CHECK(bench::QuantileMs(ns, 0.99) == Approx(100));
  CHECK(bench::QuantileMs({}, 0.5) == 0);
}
