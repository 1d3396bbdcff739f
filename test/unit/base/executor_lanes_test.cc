// Executor: the three lanes' order, the active-job limit the autotuners
// move, and the pool the scan's tuner grows.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "eventually.h"
#include "tiering/base/executor.h"

namespace tierfs {
namespace {

using Lane = Executor::Lane;
using testing::Eventually;
using namespace std::chrono_literals;

// Jobs that hold until opened, recording their order and how many ran at once.
class Jobs {
 public:
  Executor::Job Held(std::string name) {
    return Executor::Job{[this, name] {
      std::unique_lock lock(mu_);
      order_ += name + " ";
      at_start_max_ = std::max(at_start_max_, ++now_);
      cv_.wait(lock, [&] { return open_; });
      --now_;
    }};
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  std::string order() const {
    std::lock_guard lock(mu_);
    return order_;
  }
  // How many jobs are inside their body now (the executor counts a job as
  // running a moment before its body starts).
  int inside() const {
    std::lock_guard lock(mu_);
    return now_;
  }
  // The most jobs running when one started, since the last reset.
  int TakeMax() {
    std::lock_guard lock(mu_);
    int m = at_start_max_;
    at_start_max_ = 0;
    return m;
  }

 private:
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  bool open_ = false;
  int now_ = 0, at_start_max_ = 0;
  std::string order_;
};

TEST_CASE("Executor serves foreground, then look-ahead, then background", "[executor_lanes]") {
  Jobs jobs;  // outlives the executor
  Executor executor(1, 16);
  REQUIRE(executor.Submit(Lane::kBackground, jobs.Held("gate")));
  executor.Start();
  REQUIRE(Eventually([&] { return executor.running() == 1; }));
  for (auto [lane, name] : {std::pair{Lane::kBackground, "b1"},
                            {Lane::kLookahead, "l1"},
                            {Lane::kForeground, "f1"},
                            {Lane::kLookahead, "l2"},
                            {Lane::kBackground, "b2"},
                            {Lane::kForeground, "f2"}}) {
    REQUIRE(executor.Submit(lane, jobs.Held(name)));
  }
  CHECK(executor.queued(Lane::kForeground) == 2);
  CHECK(executor.queued(Lane::kLookahead) == 2);
  CHECK(executor.queued(Lane::kBackground) == 2);
  jobs.Open();
  REQUIRE(Eventually([&] { return executor.completed() == 7; }));
  CHECK(jobs.order() == "gate f1 f2 l1 l2 b1 b2 ");
}

TEST_CASE("Executor bounds each lane on its own", "[executor_lanes]") {
  Jobs jobs;  // outlives the executor
  Executor executor(1, 2);
  for (Lane lane : {Lane::kForeground, Lane::kLookahead, Lane::kBackground}) {
    CHECK(executor.Submit(lane, jobs.Held("a")));
    CHECK(executor.Submit(lane, jobs.Held("b")));
    CHECK_FALSE(executor.Submit(lane, jobs.Held("c")));
  }
  CHECK(executor.rejected() == 3);
  jobs.Open();
}

TEST_CASE("Executor runs at most active_limit jobs at once", "[executor_lanes]") {
  Jobs jobs;
  Executor executor(4, 16);
  CHECK(executor.active_limit() == 4);
  executor.SetActiveLimit(0);
  CHECK(executor.active_limit() == 1);  // clamped to 1..threads
  executor.SetActiveLimit(100);
  CHECK(executor.active_limit() == 4);
  executor.SetActiveLimit(2);
  for (int i = 0; i < 10; ++i) REQUIRE(executor.Submit(Lane::kBackground, jobs.Held("j")));
  executor.Start();
  REQUIRE(Eventually([&] { return executor.running() == 2; }));
  REQUIRE(Eventually([&] { return jobs.inside() == 2; }));
  std::this_thread::sleep_for(50ms);  // two idle threads must stay idle
  CHECK(executor.running() == 2);
  CHECK(jobs.TakeMax() == 2);
  CHECK(executor.queued(Lane::kBackground) == 8);

  executor.SetActiveLimit(4);  // raising wakes the idle threads
  REQUIRE(Eventually([&] { return executor.running() == 4; }));
  REQUIRE(Eventually([&] { return jobs.inside() == 4; }));  // all four recorded
  CHECK(executor.queued(Lane::kBackground) == 6);
  jobs.TakeMax();

  // Lowered below what runs: no job starts until all four have finished,
  // then one at a time.
  executor.SetActiveLimit(1);
  jobs.Open();
  REQUIRE(Eventually([&] { return executor.completed() == 10; }));
  CHECK(jobs.TakeMax() == 1);
}

TEST_CASE("Executor grows to more threads once started, and its limit still holds",
          "[executor_lanes]") {
  Jobs jobs;
  Executor executor(2, 16);
  executor.Grow(5);  // before Start: nothing to grow
  CHECK(executor.threads() == 2);
  for (int i = 0; i < 6; ++i) REQUIRE(executor.Submit(Lane::kForeground, jobs.Held("j")));
  executor.Start();
  REQUIRE(Eventually([&] { return jobs.inside() == 2; }));
  executor.Grow(1);  // never fewer
  CHECK(executor.threads() == 2);
  executor.Grow(5);
  CHECK(executor.threads() == 5);
  CHECK(executor.active_limit() == 2);  // growing is not widening
  std::this_thread::sleep_for(50ms);    // the new threads wait for a place
  CHECK(jobs.inside() == 2);
  executor.SetActiveLimit(5);  // the new threads run jobs
  REQUIRE(Eventually([&] { return jobs.inside() == 5; }));
  CHECK(executor.queued(Lane::kForeground) == 1);
  // Narrowed again: the place each job frees is taken one at a time
  // until all have run.
  executor.SetActiveLimit(1);
  jobs.TakeMax();
  jobs.Open();
  REQUIRE(Eventually([&] { return executor.completed() == 6; }));
  CHECK(jobs.TakeMax() == 1);
  executor.Shutdown();
  executor.Grow(8);  // once stopping: nothing
  CHECK(executor.threads() == 5);
}

}  // namespace
}  // namespace tierfs
