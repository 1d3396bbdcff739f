// Test chunks for directory tiers: chunk i of a test is a copy of SOURCE file
// "file<i>", stored as key {i, 0}. Helpers open a tier, store and read chunks,
// and show the files and journal records a tier leaves on disk. Every helper
// REQUIREs success of its setup steps (a failed setup is a failed test).
#pragma once

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/io/file_io.h"
#include "tiering/store/tier.h"
#include "tiering/store/tier_journal.h"

namespace tierfs::testing {

// Opens the directory tier "nvme" in `dir` over `io`.
inline std::unique_ptr<DirectoryTier> OpenTier(const TempTree& dir, uint64_t budget,
                                               std::shared_ptr<FileIo> io, bool reset = false) {
  auto tier = RequireOk(OpenDirectoryTier(std::move(io), "nvme", dir.root(), budget, reset));
  return tier;
}

// Chunk `i` of the test: its origin (path "file<i>") and its bytes.
inline ChunkOrigin OriginOf(int i, uint64_t length) {
  return ChunkOrigin{fmt::format("file{}", i), length * 3, 1000 + i, 0, length};
}
inline std::string BytesOf(int i, uint64_t length) {
  return PatternBytes(length, static_cast<unsigned>(i));
}

// Accepts every origin "file<i>" as key {i, 0}.
inline std::optional<ChunkKey> AcceptAll(const ChunkOrigin& o) {
  return ChunkKey{static_cast<NodeId>(std::stoi(o.path.substr(4))), 0};
}

// Reserves, writes and commits one chunk; all must succeed.
inline void Store(DirectoryTier& tier, ChunkKey key, const ChunkOrigin& origin,
                  const std::string& data) {
  REQUIRE(tier.Reserve(data.size()));
  std::unique_ptr<ChunkWriter> writer;
  REQUIRE(tier.BeginStore(key, origin, &writer) == 0);
  REQUIRE(writer != nullptr);
  REQUIRE(writer->Append(data.data(), data.size()) == 0);
  REQUIRE(writer->Commit() == 0);
}

// Reads the first n bytes of a stored chunk; "" and *err < 0 on failure.
inline std::string ReadAll(Tier& tier, ChunkKey key, size_t n, int* err) {
  std::string scratch(n, '\0');
  TierRead out;
  *err = tier.Read(key, 0, n, scratch.data(), &out);
  return *err == 0 ? std::string(out.data, out.size) : std::string();
}

// Names of the files in the tier's data directory.
inline std::set<std::string> DataFiles(const TempTree& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.Abs("data"))) {
    names.insert(e.path().filename().string());
  }
  return names;
}

// Opens a fresh tier in `dir` over the local file system, stores chunks 1..n of `length` bytes
// (chunk i as key {i, 0}), and returns the tier. *files, if given, gets chunk i's tier file name.
inline std::unique_ptr<DirectoryTier> Populate(const TempTree& dir, int n, uint64_t length,
                                               std::map<int, std::string>* files = nullptr) {
  auto tier = OpenTier(dir, 1 << 20, NewPosixFileIo());
  REQUIRE(tier->Recover(AcceptAll).empty());
  for (int i = 1; i <= n; ++i) {
    auto before = DataFiles(dir);
    Store(*tier, ChunkKey{NodeId(i), 0}, OriginOf(i, length), BytesOf(i, length));
    for (const auto& name : DataFiles(dir)) {
      if (files != nullptr && !before.count(name)) (*files)[i] = name;
    }
  }
  return tier;
}

// The records of the tier's journal as a restart would read them.
inline TierJournal::Entries JournalRecords(const TempTree& dir) {
  auto io = NewPosixFileIo();
  TierJournal::Entries records;
  REQUIRE(TierJournal(io.get(), dir.Abs("journal")).Load("", &records) == 0);
  return records;
}

}  // namespace tierfs::testing
