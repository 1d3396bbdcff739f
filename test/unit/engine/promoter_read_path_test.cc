// Promoter and ReadPath over real files: promotion on first read, one SOURCE
// read per byte under concurrency, failures that publish nothing, budgets,
// lru eviction (first-fit is the production Belady policy), and reuse of a directory tier by
// TieredStore after a restart.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "eventually.h"
#include "fault_backend.h"
#include "fault_file_io.h"
#include "prefetch/assembly/tiered_store.h"
#include "promotion_stack.h"
#include "require_ok.h"
#include "temp_tree.h"

namespace tierfs {
namespace {

using testing::FaultBackend;
using testing::FaultFileIo;
using testing::FileOp;
using testing::kMiB;
using testing::Op;
using testing::PatternBytes;
using testing::Promotions;
using testing::Ram;
using testing::ReadVia;
using testing::Source;
using testing::Stack;
using testing::TempTree;
using namespace std::chrono_literals;

// A directory tier over FaultFileIo: the device can be made to fail (ENOSPC
// on every chunk write, EIO on reads) whatever the budget says.
struct FaultyDirTier {
  explicit FaultyDirTier(uint64_t budget, const std::string& name = "full") {
    io = std::make_shared<FaultFileIo>(std::shared_ptr<FileIo>(NewPosixFileIo()));
    tier = RequireOk(OpenDirectoryTier(io, name, dir.root(), budget, false));
    std::vector<ChunkKey> kept;
    REQUIRE(tier->Recover([](const ChunkOrigin&) { return std::nullopt; }, &kept) == 0);
  }
  TempTree dir;
  std::shared_ptr<FaultFileIo> io;
  std::unique_ptr<DirectoryTier> tier;
};

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
// chunk on SOURCE, then lost the race to put it in flight (Request returned
// false), reading SOURCE itself instead of waiting: SOURCE would be read
// twice. That window is a few instructions wide, so this is a stress test,
// not a deterministic reproduction.
TEST_CASE("Readers racing on many cold files read SOURCE once per byte", "[promoter][read_path]") {
  const size_t kFiles = 200;
  Source source(std::vector<size_t>(kFiles, 2000));
  Stack stack(&source, Ram(kMiB), kMiB, "first-fit", 2);
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

TEST_CASE("A SOURCE error during promotion publishes nothing", "[promoter][read_path]") {
  Source source({50000});
  Stack stack(&source, Ram(kMiB), kMiB);
  ssize_t r = 0;
  SECTION("a transient error: the reader's own SOURCE read succeeds") {
    source.faults().Fail(Op::kRead, "f0", EIO, 1);
    CHECK(stack.Read(0, 0, 50000, &r) == source.Contents(0));
    CHECK(r == 50000);
    CHECK(stack.reads().source_reads == 1);
  }
  SECTION("a lasting error: the read fails with EIO") {
    source.faults().Fail(Op::kRead, "f0", EIO);
    CHECK(stack.Read(0, 0, 50000, &r).empty());
    CHECK(r == -EIO);
  }
  stack.Drain();
  CHECK(stack.State(0) == Catalog::kOnSource);
  CHECK(stack.tier(0).used() == 0);
  CHECK(stack.tier(0).chunks() == 0);
  CHECK(stack.promotions().failed == 1);
  CHECK(stack.promotions().done == 0);
  // Once SOURCE heals, the next read promotes it.
  source.faults().Heal();
  stack.ReadFile(0);
  CHECK(stack.State(0) == Catalog::kResidentBase);
  CHECK(stack.tier(0).used() == 50000);
}

TEST_CASE("A chunk read part-way from SOURCE for want of room stays there when room frees",
          "[promoter][read_path]") {
  // Promoting it then would read from SOURCE again the pieces its reader
  // has already read there (shards-2x in order mode read ~3% of its dataset
  // twice per steady epoch).
  constexpr uint64_t kChunk = 64 << 10;
  Source source({kChunk, 3 * kChunk});
  Stack stack(&source, Ram(kChunk), kChunk);  // room for one chunk
  // f0's promotion holds the room, and then fails (its reader reads SOURCE).
  source.faults().SetDelay(std::chrono::milliseconds(300));
  source.faults().Fail(Op::kRead, "f0", EIO, 1);
  ssize_t r0 = 0;
  std::thread f0([&] { stack.Read(0, 0, 4096, &r0); });
  REQUIRE(testing::Eventually([&] { return stack.State(0) == Catalog::kInFlight; }));
  ssize_t r = 0;
  CHECK(stack.Read(1, 0, 4096, &r) == source.Contents(1).substr(0, 4096));  // no room: SOURCE
  f0.join();
  CHECK(r0 == 4096);
  stack.Drain();
  source.faults().SetDelay({});
  REQUIRE(stack.tier(0).used() == 0);  // the room is free again
  CHECK(stack.Read(1, 4096, 4096, &r) == source.Contents(1).substr(4096, 4096));
  stack.Drain();
  CHECK(stack.State(1, 0) == Catalog::kOnSource);
  CHECK(stack.reads().bypass_kept == 1);
  // The next chunk, read from its start, is promoted as usual.
  CHECK(stack.Read(1, kChunk, 4096, &r) == source.Contents(1).substr(kChunk, 4096));
  stack.Drain();
  CHECK(Catalog::IsResident(stack.State(1, 1)));
}

TEST_CASE("A tier whose device is full is marked full, reads still succeed",
          "[promoter][read_path]") {
  Source source({40000, 30000, 20000});
  FaultyDirTier full(kMiB);
  full.io->Fail(FileOp::kWrite, "/data/f", ENOSPC);  // the device is full
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(std::move(full.tier));
  SECTION("the only tier") {
    Stack stack(&source, std::move(tiers), kMiB);
    stack.ReadFile(0);  // served from SOURCE after the failed promotion
    CHECK(stack.tier(0).limit() == 0);
    CHECK(stack.tier(0).budget() == kMiB);
    CHECK(stack.tier(0).used() == 0);
    CHECK(stack.promotions().failed == 1);
    stack.ReadFile(1);  // fits nowhere now: straight to SOURCE
    CHECK(stack.promotions().no_room == 1);
    CHECK(full.io->injected(FileOp::kWrite) == 1);
    CHECK(stack.State(0) == Catalog::kOnSource);
    CHECK(stack.State(1) == Catalog::kOnSource);
    CHECK(stack.tier(0).chunks() == 0);
  }
  SECTION("followed by a RAM tier") {
    tiers.push_back(NewMemoryTier("ram", kMiB));
    Stack stack(&source, std::move(tiers), kMiB);
    stack.ReadFile(0);
    CHECK(stack.tier(0).limit() == 0);
    stack.ReadFile(1);
    stack.ReadFile(2);
    CHECK(full.io->injected(FileOp::kWrite) == 1);
    CHECK(stack.State(0) == Catalog::kOnSource);
    CHECK(stack.State(1) == Catalog::kResidentBase + 1);
    CHECK(stack.State(2) == Catalog::kResidentBase + 1);
    CHECK(stack.tier(1).used() == 50000);
  }
}

TEST_CASE("A directory tier that fails a read serves it from SOURCE and drops the chunk",
          "[promoter][read_path]") {
  Source source({40000});
  FaultyDirTier disk(kMiB, "disk");
  FaultFileIo* io = disk.io.get();
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(std::move(disk.tier));
  Stack stack(&source, std::move(tiers), kMiB);
  stack.ReadFile(0);
  REQUIRE(stack.State(0) == Catalog::kResidentBase);
  const uint64_t before = source.read_bytes();
  io->Fail(FileOp::kRead, "/data/f", EIO, 0, 1);  // the device fails one read
  ssize_t r = 0;
  CHECK(stack.Read(0, 0, 40000, &r) == source.Contents(0));  // exact bytes, from SOURCE
  CHECK(stack.reads().tier_errors == 1);
  CHECK(source.read_bytes() - before >= 40000);
  // The broken copy is dropped (not failed on forever): budget released,
  // and the next read promotes it afresh.
  stack.Drain();
  CHECK(stack.promotions().done >= 1);
  stack.ReadFile(0);
  CHECK(stack.State(0) == Catalog::kResidentBase);
  CHECK(stack.tier(0).used() == 40000);
  CHECK(stack.tier(0).chunks() == 1);
}

TEST_CASE("A miss copied into a directory tier is served from the copy, a pool thread commits",
          "[promoter][read_path]") {
  Source source({40000, 50000});
  FaultyDirTier disk(kMiB, "disk");
  FaultFileIo* io = disk.io.get();
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(std::move(disk.tier));
  Stack stack(&source, std::move(tiers), kMiB);
  ssize_t r = 0;
  CHECK(stack.Read(0, 1000, 20000, &r) == source.Contents(0).substr(1000, 20000));
  CHECK(r == 20000);
  CHECK(stack.reads().copy_reads == 1);  // not from the tier: the commit was not waited for
  CHECK(stack.reads().tier_reads == 0);
  CHECK(stack.promoter().inline_copies() == 1);
  stack.Drain();
  CHECK(stack.State(0) == Catalog::kResidentBase);
  CHECK(stack.tier(0).used() == 40000);
  CHECK(source.read_bytes() == 40000);  // SOURCE read once, for the reader and the tier

  // A commit that fails (the device's sync): the reader still got exact
  // bytes, and the chunk is on SOURCE again, promoted afresh later.
  io->Fail(FileOp::kSync, "/data/", EIO, 0, 1);
  CHECK(stack.Read(1, 0, 50000, &r) == source.Contents(1));
  CHECK(stack.reads().copy_reads == 2);
  stack.Drain();
  CHECK(testing::Eventually([&] { return stack.State(1) == Catalog::kOnSource; }));
  CHECK(stack.promotions().failed == 1);
  stack.ReadFile(1);
  stack.Drain();
  CHECK(stack.State(1) == Catalog::kResidentBase);
}

TEST_CASE("A miss served from its copy into a directory tier still queues the file's later chunks",
          "[promoter][read_path]") {
  Source source({3 * kMiB});
  FaultyDirTier disk(8 * kMiB, "disk");
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(std::move(disk.tier));
  Stack stack(&source, std::move(tiers), kMiB);  // three chunks of 1 MiB
  ssize_t r = 0;
  CHECK(stack.Read(0, 0, 4096, &r) == source.Contents(0).substr(0, 4096));
  CHECK(stack.reads().copy_reads == 1);
  stack.Drain();
  for (uint32_t c = 0; c < 3; ++c) CHECK(Catalog::IsResident(stack.State(0, c)));
  CHECK(source.read_bytes() == 3 * kMiB);
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

TEST_CASE("A RAM budget smaller than the dataset is never exceeded", "[promoter][read_path]") {
  std::vector<size_t> sizes;
  for (size_t i = 0; i < 10; ++i) sizes.push_back(10000 + i);
  Source source(sizes);
  const uint64_t budget = 35000;
  Stack stack(&source, Ram(budget), kMiB);
  for (size_t i = 0; i < 10; ++i) {
    stack.ReadFile(i);
    CHECK(stack.tier(0).used() <= budget);
  }
  uint64_t total = 0, absent = 0;
  for (size_t i = 0; i < 10; ++i) {
    total += sizes[i];
    if (!stack.Resident(i)) absent += sizes[i];
    CHECK(stack.Resident(i) == (i < 3));  // first come, first placed
  }
  CHECK(stack.tier(0).used() == 30003);
  CHECK(source.read_bytes() == total);
  CHECK(stack.promotions().no_room == 7);
  for (size_t i = 0; i < 10; ++i) stack.ReadFile(i);
  CHECK(source.read_bytes() - total == absent);  // the second pass reads only what is absent
  CHECK(stack.tier(0).used() == 30003);
}

TEST_CASE("lru evicts through the store and keeps within the budget", "[promoter][read_path]") {
  std::vector<size_t> sizes(10, 10000);
  Source source(sizes);
  const uint64_t budget = 35000;  // three files
  Stack stack(&source, Ram(budget), kMiB, "lru");
  for (size_t i = 0; i < 10; ++i) {
    stack.ReadFile(i);
    CHECK(stack.tier(0).used() <= budget);
  }
  for (size_t i = 0; i < 10; ++i) CHECK(stack.Resident(i) == (i >= 7));
  CHECK(stack.promotions().evicted == 7);
  CHECK(stack.tier(0).chunks() == 3);
  CHECK(stack.tier(0).used() == 30000);

  const uint64_t before = source.read_bytes();
  stack.ReadFile(8);  // a hit, which makes 7 the least recently used
  CHECK(source.read_bytes() == before);
  stack.ReadFile(0);
  CHECK(source.read_bytes() == before + 10000);
  CHECK_FALSE(stack.Resident(7));
  CHECK(stack.Resident(8));
  CHECK(stack.Resident(9));
  CHECK(stack.Resident(0));
  CHECK(stack.tier(0).chunks() == 3);
}

TEST_CASE("lru: the first read of a huge file evicts only for promotions it can queue (issue 11)",
          "[promoter][read_path]") {
  constexpr uint64_t kChunk = 4096;
  std::vector<size_t> sizes(8, kChunk);
  sizes.push_back(200 * kChunk);  // file 8: 200 chunks
  Source source(sizes);
  // Room for the eight small files; one promotion thread, lanes of 2.
  Stack stack(&source, Ram(8 * kChunk), kChunk, "lru", 1, std::chrono::seconds(10), 2);
  for (size_t i = 0; i < 8; ++i) stack.ReadFile(i);
  REQUIRE(stack.tier(0).chunks() == 8);
  source.faults().SetDelay(std::chrono::milliseconds(20));  // the lane stays full
  ssize_t r = 0;
  CHECK(stack.Read(8, 0, kChunk, &r) == source.Contents(8).substr(0, kChunk));
  // One request per chunk until the background lane (2) is full, then stop:
  // not one claim, eviction and rejection for each of the 199 other chunks.
  CHECK(stack.promoter().rejected() <= 1);
  stack.Drain();
  CHECK(stack.promotions().evicted <= 4);  // chunk 0, two queued, one running
  CHECK(stack.tier(0).chunks() >= 4);      // the small files are not all gone
  source.faults().SetDelay({});
}

TEST_CASE("lru under 8 concurrent readers serves exact bytes within the budget",
          "[promoter][read_path]") {
  std::vector<size_t> sizes;
  for (size_t i = 0; i < 24; ++i) sizes.push_back(3000 + 97 * i);
  Source source(sizes);
  const uint64_t budget = 20000;
  Stack stack(&source, Ram(budget), kMiB, "lru");
  std::atomic<bool> done{false};
  std::atomic<uint64_t> max_used{0};
  std::thread monitor([&] {
    while (!done.load()) {
      uint64_t used = stack.tier(0).used();
      if (used > max_used.load()) max_used = used;
      std::this_thread::yield();
    }
  });
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (size_t t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      for (size_t n = 0; n < 150; ++n) {
        size_t i = (n * 7 + t * 5 + n * n) % sizes.size();
        uint64_t off = (n * 131) % sizes[i];
        ssize_t r = 0;
        if (stack.Read(i, off, 2000, &r) != source.Contents(i).substr(off, 2000)) bad++;
      }
    });
  }
  for (auto& t : readers) t.join();
  stack.Drain();
  done = true;
  monitor.join();
  CHECK(bad == 0);
  CHECK(max_used.load() <= budget);
  CHECK(stack.tier(0).used() <= budget);
  CHECK(stack.promotions().evicted > 0);
  // The tier and the catalog agree on what is resident.
  CHECK(stack.catalog().ResidentChunksPerTier(1)[0] == stack.tier(0).chunks());
}

TEST_CASE("A chunk a peer offers is kept as a promotion, reads of it are hits, not SOURCE's",
          "[promoter][read_path]") {
  Source source({100000, 5000, 100000});
  Stack stack(&source, Ram(150000), kMiB);
  const std::string& bytes = source.Contents(0);
  const NodeId f0 = source.Id(0);
  CHECK(stack.read_path().Holds(f0, 0) == false);
  CHECK(stack.read_path().Adopt(f0, 0, bytes.data(), bytes.size()) == 0);
  CHECK(stack.read_path().Holds(f0, 0));
  CHECK(stack.Resident(0));
  CHECK(stack.promoter().adopted() == 1);
  // Kept once: a second offer of it is refused.
  CHECK(stack.read_path().Adopt(f0, 0, bytes.data(), bytes.size()) == -EEXIST);
  ssize_t r = 0;
  CHECK(stack.Read(0, 0, 100000, &r) == bytes);
  CHECK(stack.reads().tier_reads == 1);
  CHECK(source.read_bytes() == 0);  // this node never read SOURCE for it
  // Bytes of another length are not the chunk: nothing kept, room given back.
  const std::string& f1 = source.Contents(1);
  CHECK(stack.read_path().Adopt(source.Id(1), 0, f1.data(), f1.size() - 1) == -EINVAL);
  CHECK(stack.State(1) == Catalog::kOnSource);
  CHECK(stack.read_path().Adopt(source.Id(1), 0, f1.data(), f1.size()) == 0);
  CHECK(stack.tier(0).used() == 105000);
  // No room (first-fit evicts nothing for a chunk nobody declared a use of).
  const std::string& f2 = source.Contents(2);
  CHECK(stack.read_path().Adopt(source.Id(2), 0, f2.data(), f2.size()) == -ENOSPC);
  CHECK(stack.State(2) == Catalog::kOnSource);
  CHECK(stack.promoter().adopted() == 2);
}

TEST_CASE("A chunk a peer offers to a directory tier is committed on a pool thread",
          "[promoter][read_path]") {
  Source source({40000});
  FaultyDirTier disk(kMiB, "disk");
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(std::move(disk.tier));
  Stack stack(&source, std::move(tiers), kMiB);
  const std::string& bytes = source.Contents(0);
  CHECK(stack.read_path().Adopt(source.Id(0), 0, bytes.data(), bytes.size()) == 0);
  CHECK(stack.read_path().Holds(source.Id(0), 0));  // resident, or in flight until committed
  stack.Drain();
  CHECK(stack.State(0) == Catalog::kResidentBase);
  ssize_t r = 0;
  CHECK(stack.Read(0, 0, 40000, &r) == bytes);
  CHECK(source.read_bytes() == 0);
}

TEST_CASE("Chunks kept whole for their offers hold a bounded amount of memory in all",
          "[promoter][read_path]") {
  JobPeersConfig config;
  config.peers = {{"a", "127.0.0.1", 1}, {"b", "127.0.0.1", 2}};
  config.self = "a";
  JobPeers peers(config, nullptr);  // not started: only the budget is used
  ChunkSource with_peers(nullptr, 64 * kMiB, &peers);
  ChunkSource alone(nullptr, 64 * kMiB);
  CHECK(alone.TakeOfferBuffer(kMiB).data() == nullptr);  // no peers: nothing to offer to
  CHECK(with_peers.TakeOfferBuffer(ChunkSource::kMaxOffer + 1).data() == nullptr);
  constexpr uint64_t kOne = ChunkSource::kMaxOffer;
  std::vector<ChunkSource::OfferBuffer> held;
  for (uint64_t n = 0; n + kOne <= ChunkSource::kMaxOfferHeld; n += kOne) {
    held.push_back(with_peers.TakeOfferBuffer(kOne));
    REQUIRE(held.back().data() != nullptr);
  }
  ChunkSource::OfferBuffer& first = held.front();
  std::memset(first.data(), 1, kOne);                         // really there
  CHECK(with_peers.TakeOfferBuffer(kMiB).data() == nullptr);  // the budget is spent
  first = ChunkSource::OfferBuffer();                         // released
  CHECK(with_peers.TakeOfferBuffer(kMiB).data() != nullptr);
}

}  // namespace
}  // namespace tierfs
