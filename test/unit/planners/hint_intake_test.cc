// HintIntake resolves a line outside its lock: while one writer's line
// waits for SOURCE (its HintAccess check, asked as the writer), the stats
// walk, /metrics and the planner's late lines go on, and other writers'
// lines are taken.
#include "prefetch/planners/hint_intake.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>

#include "fs/telemetry/counter_json.h"
#include "hint_parser_fixture.h"

namespace tierfs::testing {
namespace {

using namespace std::chrono_literals;

// A HintAccess whose answers for `held_uid` wait until Release (a SOURCE
// that hangs for that caller); everyone else's are yes at once.
class HeldAccess final : public HintAccess {
 public:
  explicit HeldAccess(uid_t held_uid) : held_uid_(held_uid) {}
  bool MayName(const AccessCaller& caller, NodeId) override {
    if (caller.uid != held_uid_) return true;
    std::unique_lock lock(mu_);
    waiting_ = true;
    changed_.notify_all();
    changed_.wait_for(lock, 20s, [&] { return released_; });  // bounded: the test ends anyway
    return true;
  }
  bool WaitUntilHeld() {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, 10s, [&] { return waiting_; });
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  const uid_t held_uid_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool waiting_ = false, released_ = false;
};

}  // namespace

TEST_CASE(
    "HintIntake: a line waiting for SOURCE holds up no reader of the counts, no late "
    "line, no other writer",
    "[planners]") {
  Files files;
  HintIntake intake(files.ns(), "/mnt");
  HeldAccess access(/*held_uid=*/1000);
  intake.set_access(&access);
  AccessCaller slow{};
  slow.uid = 1000;
  auto held = std::async(std::launch::async, [&] {
    return intake.FeedOrder(HintWriter{1, slow}, 0, "alpha\n");
  });
  REQUIRE(access.WaitUntilHeld());

  // The stats walk, the planner's late lines and another writer, each on a
  // thread of its own, must each be done long before the held line is.
  auto counts = std::async(std::launch::async, [&] {
    JsonCounterWriter v;
    intake.VisitOrderCounters(v);
    intake.VisitStageCounters(v);
    return v.Finish();
  });
  auto late = std::async(std::launch::async, [&] {
    std::map<uint64_t, HintParser::Result> order, stage;
    intake.FlushLate(0s, &order, &stage);
    return order.size();
  });
  auto other = std::async(std::launch::async, [&] {
    return intake.FeedOrder(Writer(2), 0, "beta\ndir/gamma\n").valid;
  });
  const bool counts_done = counts.wait_for(5s) == std::future_status::ready;
  const bool late_done = late.wait_for(5s) == std::future_status::ready;
  const bool other_done = other.wait_for(5s) == std::future_status::ready;
  access.Release();  // whatever happened, so that every thread ends
  CHECK(counts_done);
  CHECK(late_done);
  CHECK(other_done);
  CHECK(other.get() == 2);
  CHECK(held.get().files == files.Ids({"alpha"}));
  CHECK(intake.order_paths() == 3);
}

TEST_CASE("HintIntake: a line split over writes is resolved once it ends, its rejection kept",
          "[planners]") {
  Files files;
  HintIntake intake(files.ns(), "/mnt");
  HintParser::Result r = intake.FeedOrder(Writer(1), 0, "al");
  CHECK(r.files.empty());
  r = intake.FeedOrder(Writer(1), 2, "pha\nno-such\nbe");
  CHECK(r.files == files.Ids({"alpha"}));
  CHECK(r.rejected == 1);
  std::map<uint64_t, HintParser::Result> order, stage;
  intake.FlushLate(0s, &order, &stage);  // "be" taken as ended: not in the mount
  CHECK(order[1].rejected == 1);
  CHECK(order[1].files.empty());
  JsonCounterWriter v;
  intake.VisitOrderCounters(v);
  const std::string json = v.Finish();
  INFO(json);
  CHECK(json.find("\"valid_lines\": 1,") != std::string::npos);
  CHECK(json.find("\"rejected_lines\": 2,") != std::string::npos);
}

}  // namespace tierfs::testing
