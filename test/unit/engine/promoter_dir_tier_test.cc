// Promoter and ReadPath over real files, failures and directory tiers: a
// SOURCE error publishes nothing, a full device or a failing tier read falls
// back to SOURCE, a directory tier's copies (and a peer's offered chunk) are
// committed on a pool thread. The read path itself is in
// promoter_read_path_test.cc, budgets and offers in promoter_budget_test.cc.
#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eventually.h"
#include "fault_backend.h"
#include "fault_file_io.h"
#include "promotion_stack.h"
#include "require_ok.h"
#include "temp_tree.h"

namespace tierfs {
namespace {

using testing::FaultFileIo;
using testing::FileOp;
using testing::kMiB;
using testing::Op;
using testing::Ram;
using testing::Source;
using testing::Stack;
using testing::TempTree;

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

}  // namespace
}  // namespace tierfs
