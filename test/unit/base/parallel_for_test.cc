// ParallelFor: every item once, at most the threads asked for, the caller's
// thread among them.
#include "tiering/base/parallel_for.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace tierfs {
namespace {

TEST_CASE("ParallelFor calls every item once, on at most the threads asked for", "[base]") {
  constexpr size_t kItems = 200;
  std::vector<std::atomic<int>> calls(kItems);
  std::atomic<int> running{0}, most{0};
  std::mutex ids_mu;
  std::set<std::thread::id> ids;
  ParallelFor(kItems, 4, [&](size_t i) {
    const int now = running.fetch_add(1) + 1;
    for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
    }
    {
      std::lock_guard lock(ids_mu);
      ids.insert(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    calls[i].fetch_add(1);
    running.fetch_sub(1);
  });
  for (size_t i = 0; i < kItems; ++i) CHECK(calls[i].load() == 1);
  CHECK(most.load() <= 4);
  CHECK(most.load() >= 2);  // 200 items of 200 us each: more than one ran at once
  CHECK(ids.size() <= 4);
  CHECK(ids.count(std::this_thread::get_id()) == 1);  // the caller was one of them
}

TEST_CASE("ParallelFor with fewer items than threads, or none, or one thread", "[base]") {
  std::atomic<int> calls{0};
  ParallelFor(0, 8, [&](size_t) { calls++; });
  CHECK(calls == 0);
  std::set<std::thread::id> ids;
  ParallelFor(3, 0, [&](size_t) {  // 0 threads asked: the caller alone
    calls++;
    ids.insert(std::this_thread::get_id());
  });
  CHECK(calls == 3);
  CHECK(ids == std::set<std::thread::id>{std::this_thread::get_id()});
}

}  // namespace
}  // namespace tierfs
