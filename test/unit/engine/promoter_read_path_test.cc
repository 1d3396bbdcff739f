// Promoter and ReadPath over real files, the read path itself: promotion on
// first read, who copies a miss and when, one SOURCE read per byte under
// concurrency, readers of chunks in flight, reads across chunk boundaries.
// Failures and directory tiers are in promoter_dir_tier_test.cc, budgets,
// eviction and peers' offers in promoter_budget_test.cc.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "eventually.h"
#include "fault_backend.h"
#include "promotion_stack.h"

namespace tierfs {
namespace {

using testing::kMiB;
using testing::Op;
using testing::Ram;
using testing::Source;
using testing::Stack;
using namespace std::chrono_literals;

TEST_CASE("A cold read promotes the file, the next read needs no SOURCE read",
          "[promoter][read_path]") {
  Source source({100000, 5000});
  Stack stack(&source, Ram(kMiB), kMiB);
  CHECK(stack.State(0) == Catalog::kOnSource);
  stack.ReadFile(0);
  CHECK(stack.State(0) == Catalog::kResidentBase);  // the reader waited for the promotion
  CHECK(source.read_bytes() == 100000);             // ...and did not read SOURCE itself
  CHECK(stack.promotions().done == 1);
  CHECK(stack.promotions().bytes == 100000);
  CHECK(stack.tier(0).used() == 100000);
  CHECK(stack.reads().source_reads == 0);
  CHECK(stack.State(1) == Catalog::kOnSource);  // nothing else was touched
  // Not a hit: its bytes were read from SOURCE for it, then served from
  // the fresh copy (or early, from the copy being made).
  CHECK(stack.reads().tier_reads == 0);
  CHECK(stack.reads().promoted_reads + stack.reads().early_reads == 1);
  CHECK(stack.tier(0).hits() == 0);

  const uint64_t before = source.read_bytes();
  stack.ReadFile(0);
  ssize_t r = 0;
  CHECK(stack.Read(0, 99990, 100, &r) == source.Contents(0).substr(99990));
  CHECK(source.read_bytes() == before);
  CHECK(source.faults().calls(Op::kRead) == 1);
  // The later two are hits; the tier counts them and only them.
  CHECK(stack.reads().tier_reads == 2);
  CHECK(stack.tier(0).hits() == stack.reads().tier_reads);
  CHECK(stack.Read(0, 100000, 10, &r).empty());  // at EOF
  CHECK(r == 0);
}

TEST_CASE("A miss on a small chunk is copied by the reader's own thread: no hand-off, no wait",
          "[promoter][read_path]") {
  // File 0 fits one SOURCE request (1 MiB); file 1's 3 MiB chunk does not.
  Source source({100000, 3 * kMiB});
  Stack stack(&source, Ram(16 * kMiB), 4 * kMiB);
  stack.ReadFile(0);
  CHECK(stack.promoter().inline_copies() == 1);
  CHECK(stack.reads().waits == 0);           // it never waited for a pool thread
  CHECK(stack.reads().promoted_reads >= 1);  // served from its copy: a miss
  CHECK(stack.reads().tier_reads == 0);
  CHECK(stack.reads().source_reads == 0);
  CHECK(stack.Resident(0));
  CHECK(source.read_bytes() == 100000);
  // A larger chunk goes to the pool: the reader takes its first bytes early.
  // (SOURCE is slowed so that the pool cannot finish before the reader looks.)
  source.faults().SetDelay(20ms);
  stack.ReadFile(1);
  CHECK(stack.promoter().inline_copies() == 1);
  CHECK(stack.reads().waits >= 1);
  CHECK(stack.Resident(1));
  CHECK(source.read_bytes() == 100000 + 3 * kMiB);
}

// A job that holds an executor thread until Open().
class Gate {
 public:
  Executor::Job Job() {
    return Executor::Job{[this] {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return open_; });
    }};
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST_CASE("A reader starts a queued promotion it needs at once, not after the queue",
          "[promoter][read_path]") {
  Source source({100000, 100000});
  // One promotion thread, held by a job that stands for a long stage-in;
  // a read that waited for the queue would give up after 2 s and read SOURCE.
  Stack stack(&source, Ram(16 * kMiB), 4 * kMiB, "first-fit", 1, std::chrono::seconds(2));
  Gate gate;
  REQUIRE(stack.executor().Submit(Executor::Lane::kBackground, gate.Job()));
  REQUIRE(testing::Eventually([&] { return stack.executor().running() == 1; }));
  REQUIRE(stack.promoter().Request(ChunkKey{source.Id(1), 0}, Executor::Lane::kBackground) ==
          Promoter::Outcome::kStarted);
  CHECK(stack.State(1) == Catalog::kInFlight);  // claimed, its copy queued behind the gate

  ssize_t r = 0;
  CHECK(stack.Read(1, 0, 200000, &r) == source.Contents(1));
  CHECK(r == 100000);
  CHECK(stack.promoter().hurried() == 1);
  CHECK(stack.reads().wait_timeouts == 0);
  CHECK(stack.Resident(1));
  CHECK(stack.executor().queued(Executor::Lane::kBackground) == 1);  // its job, still queued
  CHECK(source.read_bytes() == 100000);
  gate.Open();
  stack.Drain();
  CHECK(source.read_bytes() == 100000);  // the queued job found it taken: SOURCE read once
  CHECK(stack.Resident(1));
  CHECK(stack.promoter().Hurry(ChunkKey{source.Id(1), 0}) == false);  // nothing queued now
}

TEST_CASE("A reader's large chunk queued behind others goes to the head of the foreground lane",
          "[promoter][read_path]") {
  Source source({100000, 100000, 100000, 100000, 100000, 100000, 3 * kMiB});
  Stack stack(&source, Ram(64 * kMiB), 4 * kMiB, "first-fit", 2, std::chrono::seconds(30));
  source.faults().SetDelay(std::chrono::milliseconds(100));  // each queued copy takes a while
  Gate gate;
  REQUIRE(stack.executor().Submit(Executor::Lane::kBackground, gate.Job()));
  REQUIRE(testing::Eventually([&] { return stack.executor().running() == 1; }));
  for (size_t i = 0; i < 7; ++i) {  // 6 small files, then the large one last
    REQUIRE(stack.promoter().Request(ChunkKey{source.Id(i), 0}, Executor::Lane::kBackground) ==
            Promoter::Outcome::kStarted);
  }
  ssize_t r = 0;
  CHECK(stack.Read(6, 0, 4096, &r) == source.Contents(6).substr(0, 4096));
  CHECK(r == 4096);
  CHECK(stack.promoter().hurried() == 1);
  // The free thread took it before the small files still queued ahead of it.
  CHECK(stack.executor().queued(Executor::Lane::kBackground) >= 3);
  gate.Open();
  stack.Drain();
  for (size_t i = 0; i < 7; ++i) CHECK(stack.Resident(i));
  uint64_t total = 6 * 100000 + 3 * kMiB;
  CHECK(source.read_bytes() == total);  // each byte from SOURCE once
}

TEST_CASE("16 concurrent readers of a cold file read SOURCE once", "[promoter][read_path]") {
  Source source({300000});
  source.faults().SetDelay(20ms);  // the promotion is slow: the readers overlap it
  Stack stack(&source, Ram(kMiB), kMiB);
  std::atomic<bool> go{false};
  std::atomic<int> good{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 16; ++t) {
    readers.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      ssize_t r = 0;
      if (stack.Read(0, 0, 300000, &r) == source.Contents(0)) good++;
    });
  }
  go = true;
  for (auto& t : readers) t.join();
  stack.Drain();
  CHECK(good == 16);
  CHECK(source.read_bytes() == 300000);
  CHECK(stack.reads().source_reads == 0);
  CHECK(stack.promotions().requested == 1);
}

// Many readers race on many cold files. Guards against a reader that saw a
// chunk on SOURCE, then lost the race to claim it (kBusy), reading SOURCE
// itself instead of waiting: SOURCE would be read twice. A claim is listed
// in flight a few instructions before the catalog says so; a reader that
// looks again in that window still sees "on SOURCE". This is a stress test,
// not a deterministic reproduction: with 2,000 files it failed 5 of 30 runs
// when the loser looked again instead of waiting on the listed claim.
TEST_CASE("Readers racing on many cold files read SOURCE once per byte", "[promoter][read_path]") {
  const size_t kFiles = 2000;
  Source source(std::vector<size_t>(kFiles, 2000));
  Stack stack(&source, Ram(8 * kMiB), kMiB, "first-fit", 2);
  std::atomic<size_t> next{0};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&] {
      for (size_t i = 0; i < kFiles; ++i) {
        // Everyone reads the same file at about the same time.
        while (next.load() < i) std::this_thread::yield();
        ssize_t r = 0;
        if (stack.Read(i, 0, 2000, &r) != source.Contents(i)) bad++;
        size_t expected = i;
        next.compare_exchange_strong(expected, i + 1);
      }
    });
  }
  for (auto& t : readers) t.join();
  CHECK(bad == 0);
  CHECK(stack.reads().source_reads == 0);
  CHECK(source.read_bytes() == kFiles * 2000);
}

TEST_CASE("A reader of a chunk in flight gets its first bytes before the copy completes",
          "[promoter][read_path]") {
  Source source({8 * kMiB});
  source.faults().SetDelay(150ms);  // each 1 MiB SOURCE read: the copy takes >= 1.2 s
  Stack stack(&source, Ram(16 * kMiB), 8 * kMiB);
  const auto start = std::chrono::steady_clock::now();
  ssize_t r = 0;
  CHECK(stack.Read(0, 4096, 4096, &r) == source.Contents(0).substr(4096, 4096));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(stack.State(0) == Catalog::kInFlight);  // returned while the copy goes on
  CHECK(took < 800ms);
  CHECK(stack.reads().early_reads == 1);
  CHECK(stack.reads().source_reads == 0);
  // A second reader further in waits only for its own piece.
  CHECK(stack.Read(0, 3 * kMiB, 1000, &r) == source.Contents(0).substr(3 * kMiB, 1000));
  stack.Drain();
  CHECK(stack.State(0) == Catalog::kResidentBase);
  CHECK(source.read_bytes() == 8 * kMiB);  // SOURCE read once
}

TEST_CASE("A reader gives up waiting for a stuck promotion and reads SOURCE",
          "[promoter][read_path]") {
  Source source({4 * kMiB});
  source.faults().SetDelay(400ms);  // a slow OST: the copy takes >= 1.6 s
  Stack stack(&source, Ram(16 * kMiB), 4 * kMiB, "first-fit", 4, 200ms);
  ssize_t r = 0;
  const auto start = std::chrono::steady_clock::now();
  // The last MiB would come after 1.6 s; the reader waits 200 ms, then reads
  // SOURCE itself (one 400 ms read).
  CHECK(stack.Read(0, 3 * kMiB + 5, 100, &r) == source.Contents(0).substr(3 * kMiB + 5, 100));
  CHECK(std::chrono::steady_clock::now() - start < 1200ms);
  CHECK(stack.reads().wait_timeouts == 1);
  CHECK(stack.reads().source_reads == 1);
  stack.Drain();
  CHECK(stack.State(0) == Catalog::kResidentBase);  // the promotion still completed
}

TEST_CASE("Reads straddling chunk boundaries return exact bytes", "[promoter][read_path]") {
  const uint64_t chunk = GENERATE(as<uint64_t>{}, kMiB, 300001);
  const size_t size = static_cast<size_t>(3 * chunk + chunk / 2 + 123);
  Source source({size});
  Stack stack(&source, Ram(16 * kMiB), chunk);
  const std::string& want = source.Contents(0);
  struct Piece {
    uint64_t off;
    size_t size;
  };
  const std::vector<Piece> pieces = {
      {chunk - 100, 300},              // across the first boundary
      {0, size + 10},                  // all of it, asked past EOF
      {2 * chunk - 1, chunk + 2},      // across two boundaries
      {3 * chunk + 5, size_t(chunk)},  // up to EOF
      {chunk, size_t(chunk)},          // exactly one chunk
      {3 * chunk - 1, 1},              // the last byte of a chunk
  };
  for (const auto& p : pieces) {
    INFO("off " << p.off << " size " << p.size);
    ssize_t r = 0;
    std::string got = stack.Read(0, p.off, p.size, &r);
    CHECK(got == want.substr(p.off, p.size));
  }
  stack.Drain();
  CHECK(stack.catalog().chunks(source.Id(0)) == 4);
  CHECK(stack.catalog().FullyResidentFiles() == 1);
  CHECK(source.read_bytes() == size);  // each byte read from SOURCE once
  CHECK(stack.reads().source_reads == 0);
}

}  // namespace
}  // namespace tierfs
