// IdleExit: finding the mount and its binds in mountinfo, and leaving only
// after the idle time without binds or requests.
#include "fs/mount/idle_exit.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>

namespace tierfs {
namespace {

using namespace std::chrono_literals;

// The daemon's mount (0:52, on a path with a space), an unrelated FUSE
// mount, and a bind of a subdirectory of the daemon's mount.
constexpr std::string_view kOwn =
    "36 25 0:32 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "90 36 0:52 / /run/tierfs-node/k\\040y/mnt rw,nosuid,nodev shared:50 - fuse.tierfs /data "
    "rw,user_id=0,group_id=0,allow_other\n"
    "91 36 0:53 / /other rw - fuse.sshfs host: rw\n";
constexpr std::string_view kBind =
    "92 36 0:52 /train /job/42/data rw,nosuid,nodev shared:50 - fuse.tierfs /data rw\n";

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TEST_CASE("MountDevice finds a FUSE mount by its unescaped mount point", "[idle_exit]") {
  CHECK(MountDevice(kOwn, "/run/tierfs-node/k y/mnt") == "0:52");
  CHECK(MountDevice(kOwn, "/run/tierfs-node/k\\040y/mnt").empty());  // escaped form is not a path
  CHECK(MountDevice(kOwn, "/").empty());                             // ext4: not FUSE
  CHECK(MountDevice(kOwn, "/nowhere").empty());
  CHECK(MountDevice("garbage\n\n1 2 3\n", "/x").empty());
}

TEST_CASE("MountsOfDevice counts the mount and each bind of it", "[idle_exit]") {
  CHECK(MountsOfDevice(kOwn, "0:52") == 1);
  CHECK(MountsOfDevice(std::string(kOwn) + std::string(kBind), "0:52") == 2);
  CHECK(MountsOfDevice("", "0:52") == 0);
}

TEST_CASE("IdleExit::Period is a quarter of the idle time within 100 ms and 5 s", "[idle_exit]") {
  CHECK(IdleExit::Period(2s) == 500ms);
  CHECK(IdleExit::Period(600s) == 5000ms);
  CHECK(IdleExit::Period(0s) == 100ms);
}

// An IdleExit on a fake mountinfo and clock; leave() is recorded.
struct Fake {
  std::mutex mu;  // guards info
  std::string info{kOwn};
  std::atomic<int64_t> used{0};
  std::atomic<int> leaves{0};
  IdleExit exit{1s, "0:52",
                IdleExit::Hooks{[this] {
                                  std::lock_guard lock(mu);
                                  return info;
                                },
                                [this] { return used.load(); }, [this] { ++leaves; }}};
  void SetInfo(std::string text) {
    std::lock_guard lock(mu);
    info = std::move(text);
  }
};

TEST_CASE("IdleExit leaves once after the idle time, not while a bind exists", "[idle_exit]") {
  Fake fake;
  fake.SetInfo(std::string(kOwn) + std::string(kBind));
  fake.exit.Start();
  std::this_thread::sleep_for(1600ms);  // longer than the idle time: the bind keeps it
  CHECK(fake.leaves == 0);
  fake.SetInfo(std::string(kOwn));
  std::this_thread::sleep_for(600ms);  // the bind went a moment ago: not yet
  CHECK(fake.leaves == 0);
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  while (fake.leaves == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  CHECK(fake.leaves == 1);
  CHECK(fake.exit.left());
}

TEST_CASE("IdleExit: requests reset its clock, and an unreadable mountinfo never leaves",
          "[idle_exit]") {
  Fake fake;
  fake.exit.Start();
  for (int i = 0; i < 8; ++i) {  // 2 s of requests every 250 ms
    fake.used = SteadyNs();
    std::this_thread::sleep_for(250ms);
  }
  CHECK(fake.leaves == 0);
  fake.SetInfo("");
  std::this_thread::sleep_for(1600ms);
  CHECK(fake.leaves == 0);
}

TEST_CASE("IdleExit::Stop interrupts a long wait at once", "[idle_exit]") {
  IdleExit idle(600s, "0:52", {[] { return std::string(); }, [] { return int64_t{0}; }, [] {}});
  idle.Start();
  std::this_thread::sleep_for(50ms);
  const auto start = std::chrono::steady_clock::now();
  idle.Stop();
  CHECK(std::chrono::steady_clock::now() - start < 500ms);
  CHECK_FALSE(idle.left());
}

}  // namespace
}  // namespace tierfs
