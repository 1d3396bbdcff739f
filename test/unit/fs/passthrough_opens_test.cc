// PassthroughOpens, the passthrough state of a mount's open files, with a
// double for the tiers' backing files and one for the kernel's table of
// backing ids: one backing file per inode while it is open, cached answers
// while a cached open lasts (the kernel refuses a mix), idle registrations
// kept and let go when a chunk leaves its tier, and an open held in its tier
// file's open or its registration holding up no other inode's open.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "fs/fuse/passthrough.h"
#include "fs/telemetry/counter_json.h"
#include "tiering/base/mutex.h"

namespace tierfs {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The tiers: files listed in `resident` are whole in one tier file. An open
// of the tier file of `held` waits at a gate until Let() (10 s at most).
class FakeTierFiles final : public BackingFiles {
 public:
  void Resident(fuse_ino_t ino, uint64_t token) {
    MutexLock lock(mu_);
    resident_[ino] = token;
  }
  void Gone(fuse_ino_t ino) {
    MutexLock lock(mu_);
    resident_.erase(ino);
  }
  // Each open of a tier file takes `slow` (outside the double's lock).
  void Slow(std::chrono::microseconds slow) {
    MutexLock lock(mu_);
    slow_ = slow;
  }
  void Hold(fuse_ino_t ino) {
    MutexLock lock(mu_);
    held_ = ino;
  }
  // Waits until the held open has reached the gate; false after 10 s.
  bool Reached() {
    MutexLock lock(mu_);
    return cv_.WaitFor(mu_, 10s, [&]() REQUIRES(mu_) { return reached_; });
  }
  void Let() {
    MutexLock lock(mu_);
    let_ = true;
    cv_.NotifyAll();
  }
  int pinned(fuse_ino_t ino) {
    MutexLock lock(mu_);
    return pins_[ino];
  }

  int Pin(fuse_ino_t ino, uint64_t* token) override {
    MutexLock lock(mu_);
    auto it = resident_.find(ino);
    if (it == resident_.end()) return -ENOENT;
    *token = it->second;
    ++pins_[ino];
    return 0;
  }
  void Unpin(fuse_ino_t ino, uint64_t) override {
    MutexLock lock(mu_);
    --pins_[ino];
  }
  int Open(fuse_ino_t ino, uint64_t) override {
    MutexLock lock(mu_);
    if (ino == held_) {
      reached_ = true;
      cv_.NotifyAll();
      cv_.WaitFor(mu_, 10s, [&]() REQUIRES(mu_) { return let_; });
    }
    if (slow_.count() > 0) {
      const auto slow = slow_;
      lock.Unlock();
      std::this_thread::sleep_for(slow);
      lock.Lock();
    }
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd >= 0 ? fd : -errno;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::map<fuse_ino_t, uint64_t> resident_ GUARDED_BY(mu_);
  std::map<fuse_ino_t, int> pins_ GUARDED_BY(mu_);
  fuse_ino_t held_ GUARDED_BY(mu_) = 0;
  std::chrono::microseconds slow_ GUARDED_BY(mu_){0};
  bool reached_ GUARDED_BY(mu_) = false;
  bool let_ GUARDED_BY(mu_) = false;
};

// The kernel's backing ids: each registration a new one.
class FakeRegistry final : public BackingRegistry {
 public:
  int Open(int fd) override {
    if (::fcntl(fd, F_GETFD) < 0) return -EBADF;
    MutexLock lock(mu_);
    live_.insert(++last_);
    return last_;
  }
  int Close(int32_t id) override {
    MutexLock lock(mu_);
    return live_.erase(id) == 1 ? 0 : -EINVAL;
  }
  size_t live() {
    MutexLock lock(mu_);
    return live_.size();
  }
  int registered() {
    MutexLock lock(mu_);
    return last_;
  }

 private:
  Mutex mu_;
  std::set<int32_t> live_ GUARDED_BY(mu_);
  int32_t last_ GUARDED_BY(mu_) = 0;
};

constexpr fuse_ino_t kA = 2, kB = 3;

struct Mount {
  explicit Mount(size_t keep_idle = 0) {
    opens.Configure(PassthroughWant::kOn, "");
    opens.AtInit(/*offered=*/true, /*dev_fd=*/-1);
    opens.UseRegistry(&registry);
    opens.UseBackingFiles(&files);
    opens.KeepIdle(keep_idle);
  }
  int Open(fuse_ino_t ino) {
    bool first = false;
    return opens.Open(ino, &first);
  }
  FakeTierFiles files;
  FakeRegistry registry;
  PassthroughOpens opens;
};

TEST_CASE("PassthroughOpens passes a whole file through with one backing file per inode",
          "[passthrough]") {
  Mount m;
  m.files.Resident(kA, 7);
  bool first = false;
  const int id = m.opens.Open(kA, &first);
  REQUIRE(id > 0);
  CHECK(first);
  CHECK(m.opens.Open(kA, &first) == id);  // the kernel refuses a second backing file
  CHECK_FALSE(first);
  CHECK(m.registry.registered() == 1);
  CHECK(m.files.pinned(kA) == 1);
  CHECK_FALSE(m.opens.Release(kA, /*passthrough=*/true));
  CHECK(m.registry.live() == 1);
  CHECK_FALSE(m.opens.Release(kA, /*passthrough=*/true));
  CHECK(m.registry.live() == 0);  // none kept idle
  CHECK(m.files.pinned(kA) == 0);
  CHECK_FALSE(m.opens.TakePaged(kA));
}

TEST_CASE("PassthroughOpens answers cached while a cached open of the inode lasts",
          "[passthrough]") {
  Mount m;
  CHECK(m.Open(kA) == -ENOENT);  // not whole in a tier yet
  m.files.Resident(kA, 7);
  CHECK(m.Open(kA) == -EBUSY);
  CHECK(m.registry.registered() == 0);
  CHECK(m.files.pinned(kA) == 0);
  CHECK_FALSE(m.opens.Release(kA, /*passthrough=*/false));
  CHECK(m.opens.Release(kA, /*passthrough=*/false));  // the last cached open
  CHECK(m.opens.TakePaged(kA));
  CHECK(m.Open(kA) > 0);
  CHECK(m.Open(kB) == -ENOENT);  // another inode is not held up
}

TEST_CASE("PassthroughOpens keeps an idle backing file until a chunk leaves its tier",
          "[passthrough]") {
  Mount m(/*keep_idle=*/1);
  m.files.Resident(kA, 7);
  m.files.Resident(kB, 8);
  const int a = m.Open(kA);
  REQUIRE(a > 0);
  m.opens.Release(kA, true);
  CHECK(m.registry.live() == 1);
  CHECK(m.files.pinned(kA) == 0);
  CHECK(m.Open(kA) == a);  // no open, no ioctl
  CHECK(m.registry.registered() == 1);
  m.opens.Release(kA, true);
  const int b = m.Open(kB);  // one idle kept: A's goes when B's is idle
  m.opens.Release(kB, true);
  CHECK(m.registry.live() == 1);
  m.opens.Removed(kB);
  CHECK(m.Open(kA) > b);  // B's let go at this call; A registered again
  CHECK(m.registry.live() == 1);
  m.files.Resident(kA, 9);  // another tier file now
  m.opens.Release(kA, true);
  const int again = m.Open(kA);
  CHECK(again == m.registry.registered());
  CHECK(m.registry.live() == 1);
}

TEST_CASE("PassthroughOpens keeps an idle backing file through an open that cannot pin it",
          "[passthrough]") {
  Mount m(/*keep_idle=*/1);
  m.files.Resident(kA, 7);
  const int a = m.Open(kA);
  REQUIRE(a > 0);
  m.opens.Release(kA, true);
  m.files.Gone(kA);  // not whole in a tier for a while, no chunk removed
  CHECK(m.Open(kA) == -ENOENT);
  CHECK(m.registry.live() == 1);
  CHECK(m.opens.Release(kA, false));
  m.files.Resident(kA, 7);
  CHECK(m.Open(kA) == a);  // reused
  CHECK(m.registry.registered() == 1);
}

// Opens on threads of their own, as FUSE workers make them.
std::future<int> OpenOn(Mount& m, fuse_ino_t ino) {
  return std::async(std::launch::async, [&m, ino] { return m.Open(ino); });
}

// An open of resident `ino` held in its tier file's open, waiting is bounded by `wait`.
std::future<int> OpenHeld(Mount& m, fuse_ino_t ino, std::chrono::milliseconds wait) {
  m.opens.BoundRegisteringWait(wait);
  m.files.Resident(ino, 7);
  m.files.Hold(ino);
  std::future<int> held = OpenOn(m, ino);
  REQUIRE(m.files.Reached());
  return held;
}

std::string Stats(const PassthroughOpens& opens) {
  JsonCounterWriter json;
  opens.VisitCounters(json);
  return json.Finish();
}

TEST_CASE("an open held in its tier file's open holds up no other inode's open", "[passthrough]") {
  Mount m;
  m.files.Resident(kB, 8);
  std::future<int> a = OpenHeld(m, kA, PassthroughOpens::kRegisteringWait);
  std::future<int> b = OpenOn(m, kB);
  const bool b_done = b.wait_for(2s) == std::future_status::ready;
  m.files.Let();
  CHECK(b_done);
  CHECK(b.get() > 0);
  CHECK(a.get() > 0);
  CHECK(m.registry.live() == 2);
}

TEST_CASE("a second open of an inode being registered waits for it and shares its backing file",
          "[passthrough]") {
  Mount m;
  std::future<int> first = OpenHeld(m, kA, 10s);
  std::future<int> second = OpenOn(m, kA);
  CHECK(second.wait_for(200ms) == std::future_status::timeout);  // it waits
  m.files.Let();
  const int id = first.get();
  CHECK(id > 0);
  CHECK(second.get() == id);
  CHECK(m.registry.registered() == 1);
  CHECK_FALSE(m.opens.Release(kA, true));
  CHECK_FALSE(m.opens.Release(kA, true));
  CHECK(m.registry.live() == 0);
  CHECK(m.files.pinned(kA) == 0);
}

TEST_CASE("past the wait's bound a second open is cached and the registering one lets go",
          "[passthrough]") {
  Mount m;
  std::future<int> first = OpenHeld(m, kA, 100ms);
  const auto start = Clock::now();
  std::future<int> second = OpenOn(m, kA);
  const bool second_done = second.wait_for(5s) == std::future_status::ready;
  const auto waited = Clock::now() - start;
  m.files.Let();
  REQUIRE(second_done);
  CHECK(second.get() == -EBUSY);  // cached: the kernel then refuses passthrough
  CHECK(waited >= 100ms);
  CHECK(first.get() == -EBUSY);   // no mix of modes on one inode
  CHECK(m.registry.live() == 0);  // its backing file let go
  CHECK(m.files.pinned(kA) == 0);
  INFO(Stats(m.opens));
  CHECK(Stats(m.opens).find("\"slow_registrations\": 1,") != std::string::npos);
  CHECK(Stats(m.opens).find("\"busy\": 1,") != std::string::npos);
  CHECK_FALSE(m.opens.Release(kA, false));
  CHECK(m.opens.Release(kA, false));
  CHECK(m.opens.TakePaged(kA));
  CHECK(m.Open(kA) > 0);  // no cached open left: passthrough again
}

// What the opens of a stress test were answered, per inode: never both
// modes at once, one backing id while passed through.
class Answers {
 public:
  void Opened(fuse_ino_t ino, int answer) {
    MutexLock lock(mu_);
    Modes& m = modes_[ino];
    if (answer > 0) {
      if (m.passed > 0 && m.id != answer) ++mixed_;
      m.id = answer;
      ++m.passed;
    } else {
      ++m.cached;
    }
    if (m.passed > 0 && m.cached > 0) ++mixed_;
  }
  void Released(fuse_ino_t ino, int answer) {
    MutexLock lock(mu_);
    Modes& m = modes_[ino];
    --(answer > 0 ? m.passed : m.cached);
  }
  int mixed() {
    MutexLock lock(mu_);
    return mixed_;
  }

 private:
  struct Modes {
    int passed = 0, cached = 0, id = 0;
  };
  Mutex mu_;
  std::map<fuse_ino_t, Modes> modes_ GUARDED_BY(mu_);
  int mixed_ GUARDED_BY(mu_) = 0;
};

TEST_CASE("PassthroughOpens keeps one mode and one backing file per inode under racing opens",
          "[passthrough]") {
  Mount m(/*keep_idle=*/2);
  m.opens.BoundRegisteringWait(1ms);  // some waits pass their bound
  m.files.Slow(1500us);
  for (fuse_ino_t ino = 2; ino < 6; ++ino) m.files.Resident(ino, 7);
  Answers answers;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 6; ++t) {  // 3,000 opens and releases each
    threads.emplace_back([&m, &answers, t] {
      std::minstd_rand random(t + 1);
      std::vector<std::pair<fuse_ino_t, int>> open;
      for (int i = 0; i < 3000; ++i) {
        const fuse_ino_t ino = 2 + random() % 4;
        if (random() % 3 != 0 || open.empty()) {
          const int answer = m.Open(ino);
          answers.Opened(ino, answer);
          open.emplace_back(ino, answer);
        }
        if (random() % 3 == 0 || open.size() > 3) {
          const size_t at = random() % open.size();
          auto [gone, answer] = open[at];
          open.erase(open.begin() + static_cast<std::ptrdiff_t>(at));
          answers.Released(gone, answer);
          m.opens.Release(gone, answer > 0);
        }
        if (random() % 50 == 0) m.opens.Removed(ino);
        if (random() % 100 == 0) m.files.Resident(ino, 7 + random() % 2);  // another tier file
        if (random() % 200 == 0) m.files.Gone(ino);  // opened cached until resident again
      }
      for (auto [ino, answer] : open) {
        answers.Released(ino, answer);
        m.opens.Release(ino, answer > 0);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  INFO(Stats(m.opens));
  CHECK(answers.mixed() == 0);
  for (fuse_ino_t ino = 2; ino < 6; ++ino) CHECK(m.files.pinned(ino) == 0);
  CHECK(m.registry.live() <= 2);  // the idle ones kept, no more
}

}  // namespace
}  // namespace tierfs
