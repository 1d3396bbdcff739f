// The directory tier and a power cut: publishes are made durable in batches
// (data/ and the journal synced every 64 publishes), so a cut loses at most
// the publishes since the last batch, and recovery keeps only chunks whose
// every byte is right. The cut is played by PowerCutFileIo, which undoes
// whatever was not synced.
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

}  // namespace
}  // namespace tierfs
