// The directory tier and a power cut: publishes are made durable in batches
// (data/ and the journal synced every 64 publishes), so a cut loses at most
// the publishes since the last batch, and recovery keeps only chunks whose
// every byte is right (also when a removal's hole punch outlived its journal
// line). The cut is played by PowerCutFileIo, which undoes whatever was not
// synced.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "chunk_files.h"
#include "power_cut_file_io.h"
#include "temp_tree.h"
#include "tiering/io/file_io.h"
#include "tiering/store/tier.h"

namespace tierfs {
namespace {

using testing::AcceptAll;
using testing::BytesOf;
using testing::DataFiles;
using testing::OpenTier;
using testing::OriginOf;
using testing::PowerCutFileIo;
using testing::ReadAll;
using testing::Store;
using testing::TempTree;

constexpr uint64_t kLength = 3000;

TEST_CASE("DirectoryTier: a power cut after 100 publishes loses at most the last batch",
          "[directory_tier][faults]") {
  TempTree dir;
  constexpr int kChunks = 100;
  {
    auto io = std::make_shared<PowerCutFileIo>(NewPosixFileIo());
    auto tier = OpenTier(dir, 1 << 20, io);
    REQUIRE(tier->Recover(AcceptAll).empty());
    for (int i = 1; i <= kChunks; ++i) {
      Store(*tier, ChunkKey{NodeId(i), 0}, OriginOf(i, kLength), BytesOf(i, kLength));
    }
    size_t undone = io->Cut();  // the power goes, the daemon with it
    INFO("undone " << undone);
    CHECK(undone > 0);  // the last batch was not synced yet
  }
  auto tier = OpenTier(dir, 1 << 20, NewPosixFileIo());
  std::vector<ChunkKey> kept = tier->Recover(AcceptAll);
  INFO(kept.size() << " chunks kept");
  CHECK(kept.size() >= 64);  // the first batch at least
  CHECK(kept.size() <= kChunks);
  for (const ChunkKey& key : kept) {
    int err = 0;
    std::string got = ReadAll(*tier, key, kLength, &err);
    REQUIRE(err == 0);
    CHECK(got == BytesOf(static_cast<int>(key.node), kLength));  // never a wrong byte
  }
  for (const auto& name : DataFiles(dir)) CHECK(name.find(".tmp") == std::string::npos);
  CHECK(DataFiles(dir).size() == kept.size());
}

TEST_CASE("DirectoryTier: a power cut right after a batch loses nothing",
          "[directory_tier][faults]") {
  TempTree dir;
  {
    auto io = std::make_shared<PowerCutFileIo>(NewPosixFileIo());
    auto tier = OpenTier(dir, 1 << 20, io);
    REQUIRE(tier->Recover(AcceptAll).empty());
    for (int i = 1; i <= 64; ++i) {
      Store(*tier, ChunkKey{NodeId(i), 0}, OriginOf(i, kLength), BytesOf(i, kLength));
    }
    io->Cut();
  }
  auto tier = OpenTier(dir, 1 << 20, NewPosixFileIo());
  CHECK(tier->Recover(AcceptAll).size() == 64);
}

// The removal's punch reached the disk, its journal line did not: the
// journal still names the chunk, whose range is now a hole. Recovery must
// not serve the hole's zeros as the chunk.
TEST_CASE("DirectoryTier: a power cut that keeps a punch but loses its journal line serves no hole",
          "[directory_tier][faults]") {
  TempTree dir;
  constexpr uint64_t kChunk = 64 * 1024;
  auto chunk_of = [](uint32_t c) {
    return ChunkOrigin{"file1", 3 * kChunk, 1001, c, kChunk, 0, 0, c * kChunk};
  };
  const std::string bytes = BytesOf(1, 3 * kChunk);
  auto accept = [](const ChunkOrigin& o) -> std::optional<ChunkKey> {
    return ChunkKey{static_cast<NodeId>(std::stoi(o.path.substr(4))), o.chunk};
  };
  {
    auto io = std::make_shared<PowerCutFileIo>(NewPosixFileIo());
    auto tier = OpenTier(dir, 8 << 20, io);
    REQUIRE(tier->Recover(AcceptAll).empty());
    for (uint32_t c = 0; c < 3; ++c) {
      Store(*tier, ChunkKey{1, c}, chunk_of(c), bytes.substr(c * kChunk, kChunk));
    }
    for (int i = 2; i <= 62; ++i) {  // the 64th publish syncs the batch
      Store(*tier, ChunkKey{NodeId(i), 0}, OriginOf(i, kLength), BytesOf(i, kLength));
    }
    CHECK(tier->Remove(ChunkKey{1, 1}) == kChunk);  // "R" appended, not synced; range punched
    CHECK(io->Cut() > 0);
  }
  auto tier = OpenTier(dir, 8 << 20, NewPosixFileIo());
  std::vector<ChunkKey> kept = tier->Recover(accept);
  CHECK(std::count(kept.begin(), kept.end(), ChunkKey{1, 0}) == 1);  // synced with the batch
  CHECK(std::count(kept.begin(), kept.end(), ChunkKey{1, 1}) == 0);  // a hole: never kept
  int err = 0;
  ReadAll(*tier, ChunkKey{1, 1}, kChunk, &err);
  CHECK(err == -ENOENT);
  for (uint32_t c : {0u, 2u}) {
    if (std::count(kept.begin(), kept.end(), ChunkKey{1, c}) == 0) continue;
    CHECK(ReadAll(*tier, ChunkKey{1, c}, kChunk, &err) == bytes.substr(c * kChunk, kChunk));
  }
}

}  // namespace
}  // namespace tierfs
