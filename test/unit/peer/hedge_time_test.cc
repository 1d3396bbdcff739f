// HedgeTime: the ceiling until 16 answers are measured, then the p99 of
// the last 128 within the floor and the ceiling, recomputed every 8.
#include "tiering/peers/client/hedge_time.h"

#include <catch2/catch.hpp>
#include <chrono>

namespace tierfs {
namespace {

using namespace std::chrono_literals;
using std::chrono::microseconds;

TEST_CASE("hedge time: the ceiling until 16 answers are measured", "[peer]") {
  HedgeTime h(50ms, 500ms);
  CHECK(h.after() == 500ms);
  for (int i = 0; i < 15; ++i) h.Record(100ms);
  CHECK(h.after() == 500ms);
  h.Record(100ms);
  CHECK(h.after() == 100ms);
}

TEST_CASE("hedge time: the p99 of the last 128 answers", "[peer]") {
  HedgeTime h(1ms, 500ms);
  for (int i = 1; i <= 128; ++i) h.Record(std::chrono::milliseconds(i));
  CHECK(h.after() == 127ms);  // the 127th of 128 sorted: 128 * 99 / 100 = 126 (from 0)
  // The ring forgets the oldest: 128 fast answers later, only they count.
  for (int i = 0; i < 128; ++i) h.Record(10ms);
  CHECK(h.after() == 10ms);
}

TEST_CASE("hedge time: recomputed every 8 answers", "[peer]") {
  HedgeTime h(1ms, 500ms);
  for (int i = 0; i < 16; ++i) h.Record(20ms);
  CHECK(h.after() == 20ms);
  for (int i = 0; i < 7; ++i) h.Record(400ms);  // 23 answers: not yet
  CHECK(h.after() == 20ms);
  h.Record(400ms);  // 24: 8 of 24 at 400 ms, the p99 among them
  CHECK(h.after() == 400ms);
}

TEST_CASE("hedge time: within the floor and the ceiling", "[peer]") {
  HedgeTime fast(50ms, 500ms);
  for (int i = 0; i < 16; ++i) fast.Record(1us);
  CHECK(fast.after() == 50ms);
  HedgeTime slow(50ms, 500ms);
  for (int i = 0; i < 16; ++i) slow.Record(3s);
  CHECK(slow.after() == 500ms);
  // A latency beyond 32 bits of microseconds is kept as the largest.
  HedgeTime huge(1ms, std::chrono::hours(2));
  for (int i = 0; i < 16; ++i) huge.Record(std::chrono::hours(2));
  CHECK(huge.after() == microseconds(UINT32_MAX));
}

}  // namespace
}  // namespace tierfs
