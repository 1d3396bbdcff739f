// The directory tier on a failing device: ENOSPC and EIO injected through its
// FileIo (FaultFileIo), with no fake tier. Each case checks what is left on
// disk (data files, journal records) and what the tier says and serves.
#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <set>
#include <string>

#include "chunk_files.h"
#include "fault_file_io.h"
#include "temp_tree.h"
#include "tiering/io/file_io.h"
#include "tiering/store/tier.h"
#include "tiering/store/tier_journal.h"

namespace tierfs {
namespace {

using testing::AcceptAll;
using testing::BytesOf;
using testing::DataFiles;
using testing::FaultFileIo;
using testing::FileOp;
using testing::JournalRecords;
using testing::OpenTier;
using testing::OriginOf;
using testing::Populate;
using testing::ReadAll;
using testing::Store;
using testing::TempTree;

constexpr uint64_t kLength = 1000;

// A tier in `dir` over a FaultFileIo, recovered (empty) and ready to store.
struct FaultyTier {
  explicit FaultyTier(const TempTree& dir)
      : io(std::make_shared<FaultFileIo>(NewPosixFileIo())), tier(OpenTier(dir, 1 << 20, io)) {
    std::vector<ChunkKey> kept;
    REQUIRE(tier->Recover(AcceptAll, &kept) == 0);
    REQUIRE(kept.empty());
  }
  // Stores chunk i up to Commit; returns Commit's result (or the first error).
  int TryStore(int i) {
    REQUIRE(tier->Reserve(kLength));
    const std::string data = BytesOf(i, kLength);
    std::unique_ptr<ChunkWriter> writer;
    if (int err = tier->BeginStore(ChunkKey{NodeId(i), 0}, OriginOf(i, kLength), &writer)) {
      return err;
    }
    int appended = writer->Append(data.data(), data.size() / 2);
    appended = appended < 0 ? appended : writer->Append(data.data() + 500, data.size() - 500);
    int committed = writer->Commit();
    CHECK((appended == 0 || committed == appended));  // a failed Append fails Commit alike
    return appended < 0 ? appended : committed;
  }
  std::shared_ptr<FaultFileIo> io;
  std::unique_ptr<DirectoryTier> tier;
};

// Nothing of chunk 1 is visible: no file, no record, not served.
void CheckNothingOfChunk1(const TempTree& dir, Tier& tier) {
  CHECK(DataFiles(dir).empty());  // its tier file unlinked: it held nothing else
  CHECK(JournalRecords(dir).empty());
  CHECK(tier.chunks() == 0);
  int err = 0;
  ReadAll(tier, ChunkKey{1, 0}, kLength, &err);
  CHECK(err == -ENOENT);
}

TEST_CASE("DirectoryTier: ENOSPC on a chunk write leaves nothing", "[directory_tier][faults]") {
  TempTree dir;
  FaultyTier t(dir);
  SECTION("on the first write") { t.io->Fail(FileOp::kWrite, "/data/f", ENOSPC); }
  SECTION("after one write went through") { t.io->Fail(FileOp::kWrite, "/data/f", ENOSPC, 1); }
  CHECK(t.TryStore(1) == -ENOSPC);
  CHECK(t.io->injected(FileOp::kWrite) == 1);  // the writer stopped at the first failure
  CheckNothingOfChunk1(dir, *t.tier);

  // The device has room again: the next chunk is stored and survives a restart.
  t.io->Heal();
  CHECK(t.TryStore(2) == 0);
  t.tier.reset();
  auto again = OpenTier(dir, 1 << 20, NewPosixFileIo());
  CHECK(again->Recover(AcceptAll) == std::vector<ChunkKey>{ChunkKey{2, 0}});
  int err = 0;
  CHECK(ReadAll(*again, ChunkKey{2, 0}, kLength, &err) == BytesOf(2, kLength));
}

TEST_CASE("DirectoryTier: a failed write, fdatasync, close or ftruncate publishes nothing",
          "[directory_tier][faults]") {
  TempTree dir;
  FaultyTier t(dir);
  int expected = 0;
  SECTION("write (over quota)") {
    t.io->Fail(FileOp::kWrite, "/data/", EDQUOT, 1);
    expected = -EDQUOT;
  }
  SECTION("fdatasync") {
    t.io->Fail(FileOp::kSync, "/data/", EIO);
    expected = -EIO;
  }
  SECTION("close (a late write error)") {
    t.io->Fail(FileOp::kClose, "/data/", EDQUOT, 1);  // the tier file's making goes through
    expected = -EDQUOT;
  }
  SECTION("ftruncate of a new tier file") {
    t.io->Fail(FileOp::kTruncate, "/data/", ENOSPC);
    expected = -ENOSPC;
  }
  CHECK(t.TryStore(1) == expected);
  CHECK(t.io->injected() == 1);
  CheckNothingOfChunk1(dir, *t.tier);
  t.tier.reset();
  CHECK(OpenTier(dir, 1 << 20, NewPosixFileIo())->Recover(AcceptAll).empty());
}

TEST_CASE("DirectoryTier: BeginStore reports a failed open and gives no writer",
          "[directory_tier][faults]") {
  TempTree dir;
  FaultyTier t(dir);
  t.io->Fail(FileOp::kOpen, "/data/f", EMFILE);
  std::unique_ptr<ChunkWriter> writer;
  CHECK(t.tier->BeginStore(ChunkKey{1, 0}, OriginOf(1, kLength), &writer) == -EMFILE);
  CHECK(writer == nullptr);
  CheckNothingOfChunk1(dir, *t.tier);
}

TEST_CASE("DirectoryTier: EIO on a tier read is returned to the reader",
          "[directory_tier][faults]") {
  TempTree dir;
  FaultyTier t(dir);
  REQUIRE(t.TryStore(1) == 0);
  int err = 0;
  SECTION("pread") { t.io->Fail(FileOp::kRead, "/data/f", EIO, 0, 1); }
  SECTION("open") { t.io->Fail(FileOp::kOpen, "/data/f", EIO, 0, 1); }
  CHECK(ReadAll(*t.tier, ChunkKey{1, 0}, kLength, &err).empty());
  CHECK(err == -EIO);
  CHECK(t.io->injected() == 1);
  // A passing fault: the chunk is still there and whole.
  CHECK(ReadAll(*t.tier, ChunkKey{1, 0}, kLength, &err) == BytesOf(1, kLength));
  CHECK(err == 0);
}

// Documented in JournaledDirectoryTier::Publish: a chunk the journal could not record is
// served for the rest of the mount, and a restart removes it (a file no
// record names is unknown).
TEST_CASE("DirectoryTier: a journal write failing at publish serves the chunk this mount only",
          "[directory_tier][faults]") {
  TempTree dir;
  FaultyTier t(dir);
  t.io->Fail(FileOp::kWrite, "/journal", ENOSPC);
  CHECK(t.TryStore(1) == 0);
  CHECK(t.io->injected(FileOp::kWrite) == 1);
  CHECK(t.tier->chunks() == 1);
  int err = 0;
  CHECK(ReadAll(*t.tier, ChunkKey{1, 0}, kLength, &err) == BytesOf(1, kLength));
  CHECK(DataFiles(dir).size() == 1);  // the chunk's tier file, complete
  CHECK(JournalRecords(dir).empty());

  t.tier.reset();
  auto again = OpenTier(dir, 1 << 20, NewPosixFileIo());
  CHECK(again->Recover(AcceptAll).empty());
  CHECK(DataFiles(dir).empty());
  CHECK(again->used() == 0);
}

// Recovery either succeeds or leaves the tier empty and unused (issue 11).
TEST_CASE("DirectoryTier: a journal rewrite failing at recovery empties and disables the tier",
          "[directory_tier][faults]") {
  TempTree dir;
  Populate(dir, 3, kLength);
  auto io = std::make_shared<FaultFileIo>(NewPosixFileIo());
  int expected = 0;
  SECTION("ENOSPC writing the new journal") {
    io->Fail(FileOp::kWrite, "/journal.tmp", ENOSPC);
    expected = -ENOSPC;
  }
  SECTION("EIO renaming it into place") {
    io->Fail(FileOp::kRename, "/journal", EIO);
    expected = -EIO;
  }
  SECTION("data/ cannot be listed") {
    io->Fail(FileOp::kList, "/data", EIO, 0, 1);
    expected = -EIO;
  }
  auto tier = OpenTier(dir, 1 << 20, io);
  std::vector<ChunkKey> kept = {ChunkKey{9, 9}};
  CHECK(tier->Recover(AcceptAll, &kept) == expected);
  CHECK(io->injected() == 1);
  CHECK(kept.empty());
  CHECK(tier->chunks() == 0);
  CHECK(tier->used() == 0);
  CHECK(tier->limit() == 0);
  CHECK_FALSE(tier->Reserve(1));
  int err = 0;
  ReadAll(*tier, ChunkKey{1, 0}, kLength, &err);
  CHECK(err == -ENOENT);
  CHECK(DataFiles(dir).empty());
  CHECK_FALSE(std::filesystem::exists(dir.Abs("journal")));
  CHECK_FALSE(std::filesystem::exists(dir.Abs("journal.tmp")));
}

// Issue 11 item 8: the old journal outlived a failed rewrite and named files
// just deleted, while new files took numbers above the files left only: after
// two failed rewrites in a row, the next mount served file 5's bytes as file 3.
TEST_CASE("Regression: failed journal rewrites never let a mount serve one file as another",
          "[directory_tier][faults]") {
  TempTree dir;
  Populate(dir, 3, kLength);
  for (int mount = 2; mount <= 3; ++mount) {  // both with a full device for the journal
    auto io = std::make_shared<FaultFileIo>(NewPosixFileIo());
    io->Fail(FileOp::kWrite, "/journal.tmp", ENOSPC);
    auto tier = OpenTier(dir, 1 << 20, io);
    std::vector<ChunkKey> kept;
    CHECK(tier->Recover(
              [](const ChunkOrigin& o) -> std::optional<ChunkKey> {
                if (o.path == "file3") return std::nullopt;  // SOURCE changed: stale
                return AcceptAll(o);
              },
              &kept) == -ENOSPC);
    // Mount 2 promotes nothing; mount 3 a chunk of file 5, as long as file
    // 3's, if the tier takes any.
    if (mount == 3 && tier->Reserve(kLength))
      Store(*tier, ChunkKey{5, 0}, OriginOf(5, kLength), BytesOf(5, kLength));
  }
  auto tier = OpenTier(dir, 1 << 20, NewPosixFileIo());
  std::vector<ChunkKey> kept;
  REQUIRE(tier->Recover(AcceptAll, &kept) == 0);
  for (ChunkKey key : kept) {
    int err = 0;
    INFO("chunk of file" << key.node);
    CHECK(key.node != 3);
    CHECK(ReadAll(*tier, key, kLength, &err) == BytesOf(int(key.node), kLength));
  }
}

TEST_CASE("DirectoryTier: new chunks never take a number a journal record names",
          "[directory_tier]") {
  TempTree dir;
  auto tier = OpenTier(dir, 1 << 20, NewPosixFileIo());
  // Record 7's file f7 is gone (its removal was never journalled); record 2's
  // (in f2) is whole; record 9 names tier file 11, absent too.
  dir.Write("journal", "tierfs-journal 3 \n" +
                           TierJournal::FormatPublish(2, {2, OriginOf(2, kLength)}) +
                           TierJournal::FormatPublish(7, {7, OriginOf(1, kLength)}) +
                           TierJournal::FormatPublish(9, {11, OriginOf(4, kLength)}));
  dir.Write("data/f2", BytesOf(2, kLength) + std::string(2 * kLength, '\0'));
  CHECK(tier->Recover(AcceptAll) == std::vector<ChunkKey>{ChunkKey{2, 0}});
  for (int i : {3, 4})
    Store(*tier, ChunkKey{NodeId(i), 0}, OriginOf(i, kLength), BytesOf(i, kLength));
  const std::set<std::string> names = DataFiles(dir);
  CHECK(names.size() == 3);
  CHECK(names.count("f2") == 1);
  for (const char* taken : {"f7", "f9", "f11"}) CHECK(names.count(taken) == 0);
  int err = 0;
  CHECK(ReadAll(*tier, ChunkKey{2, 0}, kLength, &err) == BytesOf(2, kLength));
}

TEST_CASE("DirectoryTier: file names that would wrap the chunk counter are removed",
          "[directory_tier]") {
  TempTree dir;
  Populate(dir, 1, kLength);
  const std::set<std::string> populated = DataFiles(dir);
  for (const char* stray : {"f18446744073709551615", "f9223372036854775808",
                            "f99999999999999999999999", "f007", "f0", "f-1", "f+2"}) {
    dir.Write(std::string("data/") + stray, BytesOf(9, 3 * kLength));
  }
  auto tier = OpenTier(dir, 1 << 20, NewPosixFileIo());
  CHECK(tier->Recover(AcceptAll) == std::vector<ChunkKey>{ChunkKey{1, 0}});
  CHECK(DataFiles(dir) == populated);
  // Two new chunks of the same length: neither may land on chunk 1's file.
  Store(*tier, ChunkKey{2, 0}, OriginOf(2, kLength), BytesOf(2, kLength));
  Store(*tier, ChunkKey{3, 0}, OriginOf(3, kLength), BytesOf(3, kLength));
  int err = 0;
  for (int i = 1; i <= 3; ++i) {
    CHECK(ReadAll(*tier, ChunkKey{NodeId(i), 0}, kLength, &err) == BytesOf(i, kLength));
  }
  CHECK(DataFiles(dir).size() == 3);
}

}  // namespace
}  // namespace tierfs
