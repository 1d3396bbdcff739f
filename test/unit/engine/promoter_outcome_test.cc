// Promoter::Request and PromoteHere say what they did, and why nothing
// started: a caller decides from the answer, not from another look at the
// catalog (which another thread may change in between).
#include <catch2/catch.hpp>
#include <chrono>

#include "eventually.h"
#include "promotion_stack.h"

namespace tierfs {
namespace {

using testing::kMiB;
using testing::Ram;
using testing::Source;
using testing::Stack;
using namespace std::chrono_literals;
using Outcome = Promoter::Outcome;

TEST_CASE("Promoter::Request starts a promotion once, later calls find it under way or done",
          "[promoter]") {
  Source source({2 * kMiB});
  Stack stack(&source, Ram(16 * kMiB), 2 * kMiB);
  const ChunkKey key{source.Id(0), 0};
  CHECK(stack.promoter().Request(key, Executor::Lane::kBackground) == Outcome::kStarted);
  CHECK(stack.promoter().Request(key, Executor::Lane::kForeground) == Outcome::kBusy);
  stack.Drain();
  REQUIRE(stack.Resident(0));
  CHECK(stack.promoter().Request(key, Executor::Lane::kForeground) == Outcome::kBusy);
  CHECK(stack.promoter().PromoteHere(key) == Outcome::kBusy);
  CHECK(stack.promoter().requested() == 1);
}

TEST_CASE("Promoter says there is no room for a chunk no tier can hold", "[promoter]") {
  Source source({2 * kMiB, 512 * 1024});
  Stack stack(&source, Ram(1 * kMiB), 2 * kMiB);
  const ChunkKey big{source.Id(0), 0};
  CHECK(stack.promoter().Request(big, Executor::Lane::kForeground) == Outcome::kNoRoom);
  CHECK(stack.promoter().PromoteHere(big) == Outcome::kNoRoom);
  CHECK(stack.State(0) == Catalog::kOnSource);
  // A chunk that fits is copied here, on the calling thread.
  CHECK(stack.promoter().PromoteHere(ChunkKey{source.Id(1), 0}) == Outcome::kStarted);
  CHECK(stack.Resident(1));
}

TEST_CASE("Promoter says the lane is full, and puts nothing in flight", "[promoter]") {
  Source source({kMiB, kMiB, kMiB});
  source.faults().SetDelay(300ms);  // the one pool thread stays in f0's copy
  Stack stack(&source, Ram(16 * kMiB), kMiB, "first-fit", /*threads=*/1, 10s, /*queue=*/1);
  Promoter& promoter = stack.promoter();
  REQUIRE(promoter.Request(ChunkKey{source.Id(0), 0}, Executor::Lane::kBackground) ==
          Outcome::kStarted);
  REQUIRE(testing::Eventually([&] { return stack.executor().running() == 1; }));
  // f1 waits in the lane, which then holds as many as it may.
  REQUIRE(promoter.Request(ChunkKey{source.Id(1), 0}, Executor::Lane::kBackground) ==
          Outcome::kStarted);
  CHECK(promoter.Request(ChunkKey{source.Id(2), 0}, Executor::Lane::kBackground) ==
        Outcome::kLaneFull);
  CHECK(stack.State(2) == Catalog::kOnSource);
  // A chunk in flight with the lane full is under way, not refused.
  CHECK(promoter.Request(ChunkKey{source.Id(1), 0}, Executor::Lane::kBackground) == Outcome::kBusy);
  CHECK(promoter.rejected() == 2);
  stack.Drain();
}

}  // namespace
}  // namespace tierfs
