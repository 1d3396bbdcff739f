// FetchSlots: at most max requests at once; a caller beyond waits for a
// slot up to its deadline, and a slot given back wakes it; NotifyAll wakes
// those waiting for something else (the connection), and a wait without
// one ends at its deadline.
#include "tiering/peers/client/fetch_slots.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

namespace tierfs {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_CASE("fetch slots: a caller beyond max waits up to its deadline", "[peer]") {
  FetchSlots s(2);
  CHECK(s.Take(Clock::now()));
  CHECK(s.Take(Clock::now()));
  CHECK(s.in_flight() == 2);
  const auto start = Clock::now();
  CHECK_FALSE(s.Take(start + 100ms));
  CHECK(Clock::now() - start >= 100ms);
  CHECK(s.in_flight() == 2);
}

TEST_CASE("fetch slots: a slot given back wakes a waiter before its deadline", "[peer]") {
  FetchSlots s(1);
  REQUIRE(s.Take(Clock::now()));
  std::thread giver([&] {
    std::this_thread::sleep_for(50ms);
    s.Give();
  });
  const auto start = Clock::now();
  CHECK(s.Take(start + 10s));
  CHECK(Clock::now() - start < 5s);
  giver.join();
  CHECK(s.in_flight() == 1);
  s.Give();
  CHECK(s.in_flight() == 0);
}

TEST_CASE("fetch slots: NotifyAll wakes a caller waiting for another change", "[peer]") {
  FetchSlots s(1);
  std::atomic<bool> up{false};
  std::thread changer([&] {
    std::this_thread::sleep_for(50ms);
    up = true;
    s.NotifyAll();
  });
  const auto start = Clock::now();
  s.WaitUntil(start + 10s, [&] { return up.load(); });
  CHECK(up.load());
  CHECK(Clock::now() - start < 5s);
  changer.join();
  // Nothing changes: the wait ends at its deadline.
  const auto again = Clock::now();
  s.WaitUntil(again + 100ms, [] { return false; });
  CHECK(Clock::now() - again >= 100ms);
}

}  // namespace
}  // namespace tierfs
