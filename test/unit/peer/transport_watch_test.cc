// TransportWatch: a side whose transport failed is started again, at most
// max_restarts times in a window, then stays off; one whose restart fails
// stays off; one that has not failed is left alone.
#include "tiering/peers/transport/transport_watch.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

namespace tierfs {
namespace {

using namespace std::chrono_literals;

struct FakeSide {
  std::atomic<bool> failed{false};
  std::atomic<int> restarts{0};
  Status next = Status::Ok();
  TransportWatch::Side Side(const std::string& name) {
    return {name, [this] { return failed.load(); },
            [this] {
              if (next.ok()) {
                ++restarts;
                failed = false;
              }
              return next;
            }};
  }
};

TEST_CASE("transport watch: at most max_restarts in the window, then the side stays off",
          "[peer]") {
  FakeSide asking, serving;
  TransportWatch::Options options;
  options.max_restarts = 3;
  options.window = std::chrono::seconds(600);
  TransportWatch watch({asking.Side("asking"), serving.Side("serving")}, options);
  watch.Check();
  CHECK(asking.restarts == 0);  // nothing failed: nothing done
  for (int i = 1; i <= 3; ++i) {
    asking.failed = true;
    watch.Check();
    CHECK(asking.restarts == i);
    CHECK_FALSE(asking.failed);
  }
  asking.failed = true;
  watch.Check();
  CHECK(asking.restarts == 3);
  CHECK(watch.off(0));
  watch.Check();  // off for good: not tried again
  CHECK(asking.restarts == 3);
  CHECK_FALSE(watch.off(1));  // the other side is its own
  serving.failed = true;
  watch.Check();
  CHECK(serving.restarts == 1);
}

TEST_CASE("transport watch: restarts older than the window no longer count", "[peer]") {
  FakeSide side;
  TransportWatch::Options options;
  options.max_restarts = 1;
  options.window = std::chrono::seconds(1);
  TransportWatch watch({side.Side("asking")}, options);
  side.failed = true;
  watch.Check();
  CHECK(side.restarts == 1);
  std::this_thread::sleep_for(1100ms);
  side.failed = true;
  watch.Check();
  CHECK(side.restarts == 2);
  CHECK_FALSE(watch.off(0));
}

TEST_CASE(
    "transport watch: a side whose restart fails stays off, and the thread restarts within its "
    "period",
    "[peer]") {
  FakeSide broken, fine;
  broken.next = Status::Error(ETIMEDOUT, "UCX did not make a new worker in time");
  TransportWatch::Options options;
  options.period = 20ms;
  TransportWatch watch({broken.Side("asking"), fine.Side("serving")}, options);
  watch.Start();
  broken.failed = true;
  std::this_thread::sleep_for(200ms);
  CHECK(watch.off(0));
  fine.failed = true;
  std::this_thread::sleep_for(200ms);
  watch.Stop();
  CHECK(fine.restarts == 1);
  CHECK_FALSE(watch.off(1));
}

}  // namespace
}  // namespace tierfs
