// The pfs-sim timing model, driven by a fake clock: one reader is bound by
// latency + per-stream bandwidth, readers add up to the slot count, and no
// load passes the aggregate cap. Exact arithmetic, so tolerances are 1%.
#include "service_model.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

using pfssim::ServicePool;

namespace {

constexpr int64_t kMs = 1000000;
constexpr uint64_t kMiB = 1 << 20;

// `readers` closed-loop readers issue `per_reader` requests of `bytes` each,
// every reader re-issuing when its previous request completes. Returns the
// aggregate throughput in bytes per second.
double ClosedLoopThroughput(ServicePool& pool, int readers, int per_reader, uint64_t bytes) {
  std::vector<int64_t> ready(readers, 0);
  for (int round = 0; round < per_reader; ++round) {
    for (int r = 0; r < readers; ++r) ready[r] = pool.Book(ready[r], bytes);
  }
  const int64_t end = *std::max_element(ready.begin(), ready.end());
  return static_cast<double>(bytes) * readers * per_reader / (static_cast<double>(end) / 1e9);
}

}  // namespace

TEST_CASE("one reader is bound by latency plus stream bandwidth", "[pfs-sim][model]") {
  // 2 ms + 1 MiB at 100 MB/s (10.49 ms) = 12.49 ms per request.
  ServicePool pool(8, 2 * kMs, 100e6, 400e6);
  const double expected = kMiB / (0.002 + kMiB / 100e6);
  CHECK(ClosedLoopThroughput(pool, 1, 50, kMiB) == Approx(expected).epsilon(0.01));
}

TEST_CASE("readers add up while slots and the link have room", "[pfs-sim][model]") {
  ServicePool pool(8, 2 * kMs, 100e6, 10e9);
  const double one = kMiB / (0.002 + kMiB / 100e6);
  CHECK(ClosedLoopThroughput(pool, 4, 50, kMiB) == Approx(4 * one).epsilon(0.01));
}

TEST_CASE("readers beyond the slot count queue", "[pfs-sim][model]") {
  ServicePool pool(2, 2 * kMs, 100e6, 10e9);
  const double one = kMiB / (0.002 + kMiB / 100e6);
  CHECK(ClosedLoopThroughput(pool, 6, 30, kMiB) == Approx(2 * one).epsilon(0.01));
}

TEST_CASE("no load passes the aggregate cap", "[pfs-sim][model]") {
  ServicePool pool(16, 2 * kMs, 100e6, 300e6);
  // 16 readers could move ~1.3 GB/s; the link allows 300 MB/s.
  CHECK(ClosedLoopThroughput(pool, 16, 30, kMiB) == Approx(300e6).epsilon(0.02));
}

TEST_CASE("small requests are latency-bound", "[pfs-sim][model]") {
  ServicePool pool(8, 5 * kMs, 1e9, 1e9);
  // 4 KiB requests: 5 ms each dominates, ~200 requests/s per reader.
  const double rps = ClosedLoopThroughput(pool, 1, 100, 4096) / 4096;
  CHECK(rps == Approx(1 / (0.005 + 4096 / 1e9)).epsilon(0.01));
}

TEST_CASE("a stall delays its request and holds its slot", "[pfs-sim][model]") {
  ServicePool pool(1, 1 * kMs, 0, 0);
  CHECK(pool.Book(0, 0, 100 * kMs) == 101 * kMs);
  CHECK(pool.Book(0, 0) == 102 * kMs);  // waited for the stalled slot
}

TEST_CASE("metadata pool without bandwidth limits is pure latency", "[pfs-sim][model]") {
  ServicePool pool(2, 1 * kMs, 0, 0);
  CHECK(pool.Book(10 * kMs, 0) == 11 * kMs);
  CHECK(pool.Book(10 * kMs, 0) == 11 * kMs);
  CHECK(pool.Book(10 * kMs, 0) == 12 * kMs);  // third waits for a slot
}
