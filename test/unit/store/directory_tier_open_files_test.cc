// The directory tier keeps its tier files open for reading (OpenTierFiles):
// at most TierFilesKeptOpen() of them; a file leaves the cache as it is
// unlinked, so no descriptor holds a removed file's blocks and a later file
// of the same SOURCE file never reads an old one; a read whose file goes
// while it reads answers ENOENT, never the old bytes; opens go through the
// tier's FileIo, so an injected failure fails that read and no later one.

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "chunk_files.h"
#include "fault_file_io.h"
#include "hooked_tier_io.h"
#include "temp_tree.h"
#include "tiering/io/file_io.h"
#include "tiering/store/open_tier_files.h"
#include "tiering/store/tier.h"

namespace tierfs {
namespace {

using directory_tier::TierFilesKeptOpen;
using testing::AcceptAll;
using testing::BytesOf;
using testing::FaultFileIo;
using testing::FileOp;
using testing::HookedTierIo;
using testing::OpenTier;
using testing::OriginOf;
using testing::ReadAll;
using testing::Store;
using testing::TempTree;

constexpr uint64_t kLength = 1000;

// Descriptors this process holds now.
size_t OpenFds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// Descriptors of this process on a tier file of `dir` that was unlinked.
std::vector<std::string> DeletedTierFds(const TempTree& dir) {
  std::vector<std::string> found;
  const std::string data = dir.Abs("data/f");
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind(data, 0) == 0 && target.find(" (deleted)") != std::string::npos) {
      found.push_back(target);
    }
  }
  return found;
}

std::unique_ptr<DirectoryTier> Fresh(const TempTree& dir, std::shared_ptr<FileIo> io) {
  auto tier = OpenTier(dir, 1 << 20, std::move(io));
  REQUIRE(tier->Recover(AcceptAll).empty());
  return tier;
}
void StoreFile(DirectoryTier& tier, int i) {
  Store(tier, ChunkKey{NodeId(i), 0}, OriginOf(i, kLength), BytesOf(i, kLength));
}
std::string ReadFile(Tier& tier, int i, int* err) {
  return ReadAll(tier, ChunkKey{NodeId(i), 0}, kLength, err);
}

TEST_CASE("DirectoryTier: a read after its file's last chunk went gets ENOENT, never old bytes",
          "[directory_tier][open_files]") {
  TempTree dir;
  auto io = std::make_shared<HookedTierIo>();
  auto tier = Fresh(dir, io);
  constexpr int kFile = 500;  // a node id no tier file's seq is near
  StoreFile(*tier, kFile);
  int err = 0;
  REQUIRE(ReadFile(*tier, kFile, &err) == BytesOf(kFile, kLength));  // its file is kept open now

  SECTION("removed before the read") {
    tier->Release(tier->Remove(ChunkKey{kFile, 0}));
    CHECK(ReadFile(*tier, kFile, &err).empty());
    CHECK(err == -ENOENT);
  }
  SECTION("removed while the read's pread runs on the open file") {
    io->in_read = [&] { tier->Release(tier->Remove(ChunkKey{kFile, 0})); };
    CHECK(ReadFile(*tier, kFile, &err).empty());  // the file, unlinked, still held the bytes
    CHECK(io->in_read == nullptr);                // the removal ran
    CHECK(err == -ENOENT);
  }
  CHECK(testing::DataFiles(dir).empty());
  CHECK(DeletedTierFds(dir).empty());
  // The same SOURCE file stored again, with other bytes: a new tier file,
  // read through a new descriptor.
  Store(*tier, ChunkKey{kFile, 0}, OriginOf(kFile, kLength), BytesOf(7, kLength));
  CHECK(ReadFile(*tier, kFile, &err) == BytesOf(7, kLength));
  CHECK(err == 0);
}

TEST_CASE("DirectoryTier keeps at most TierFilesKeptOpen() tier files open",
          "[directory_tier][open_files]") {
  const size_t kept = TierFilesKeptOpen();
  REQUIRE(kept >= 16);
  REQUIRE(kept <= 256);
  TempTree dir;
  auto io = std::make_shared<FaultFileIo>(NewPosixFileIo());  // counts the opens
  auto tier = Fresh(dir, io);
  const int files = static_cast<int>(kept) + 50;
  for (int i = 1; i <= files; ++i) StoreFile(*tier, i);
  const size_t before = OpenFds();
  const uint64_t opens = io->calls(FileOp::kOpen);
  int err = 0;
  for (int i = 1; i <= files; ++i) REQUIRE(ReadFile(*tier, i, &err) == BytesOf(i, kLength));
  CHECK(io->calls(FileOp::kOpen) - opens == static_cast<uint64_t>(files));
  const size_t after = OpenFds();
  INFO("descriptors before " << before << ", after " << after << ", kept " << kept);
  CHECK(after <= before + kept);
  CHECK(after >= before + kept / 2);  // they are kept, not closed after each read
  CHECK(tier->open_files() == kept);
  // The files read last are still open: read again without an open.
  for (int i = files - static_cast<int>(kept) + 1; i <= files; ++i) {
    REQUIRE(ReadFile(*tier, i, &err) == BytesOf(i, kLength));
  }
  CHECK(io->calls(FileOp::kOpen) - opens == static_cast<uint64_t>(files));
  // The first ones were closed: read again, each is opened anew.
  REQUIRE(ReadFile(*tier, 1, &err) == BytesOf(1, kLength));
  CHECK(io->calls(FileOp::kOpen) - opens == static_cast<uint64_t>(files) + 1);
  CHECK(OpenFds() <= before + kept);
}

TEST_CASE("DirectoryTier holds no descriptor of a tier file it unlinked",
          "[directory_tier][open_files]") {
  TempTree dir;
  auto io = std::make_shared<HookedTierIo>();
  auto tier = Fresh(dir, io);
  constexpr int kFiles = 20;
  for (int i = 1; i <= kFiles; ++i) StoreFile(*tier, i);
  int err = 0;
  for (int i = 1; i <= kFiles; ++i) REQUIRE(ReadFile(*tier, i, &err) == BytesOf(i, kLength));

  SECTION("every chunk removed after its file was read") {
    for (int i = 1; i <= kFiles; ++i) tier->Release(tier->Remove(ChunkKey{NodeId(i), 0}));
  }
  SECTION("a file unlinked between a read's open and its keeping the descriptor") {
    // File kFiles + 1, never read: its first read opens it, and its last
    // chunk is removed (the file unlinked) right after that open.
    StoreFile(*tier, kFiles + 1);
    io->after_open = [&] { tier->Release(tier->Remove(ChunkKey{NodeId(kFiles + 1), 0})); };
    CHECK(ReadFile(*tier, kFiles + 1, &err).empty());
    CHECK(io->after_open == nullptr);  // the removal ran
    CHECK(err == -ENOENT);
    for (int i = 1; i <= kFiles; ++i) tier->Release(tier->Remove(ChunkKey{NodeId(i), 0}));
  }
  CHECK(tier->chunks() == 0);
  CHECK(tier->open_files() == 0);
  CHECK(testing::DataFiles(dir).empty());
  CHECK(DeletedTierFds(dir).empty());
}

TEST_CASE("DirectoryTier: an injected open failure fails that read only",
          "[directory_tier][open_files][faults]") {
  TempTree dir;
  auto io = std::make_shared<FaultFileIo>(NewPosixFileIo());
  auto tier = Fresh(dir, io);
  const int files = static_cast<int>(TierFilesKeptOpen()) + 1;
  for (int i = 1; i <= files; ++i) StoreFile(*tier, i);
  int err = 0;
  // File 1 read first, then closed to make room for the others.
  for (int i = 1; i <= files; ++i) REQUIRE(ReadFile(*tier, i, &err) == BytesOf(i, kLength));
  SECTION("EIO") {
    io->Fail(FileOp::kOpen, "/data/f", EIO, 0, 1);
    CHECK(ReadFile(*tier, 1, &err).empty());
    CHECK(err == -EIO);
  }
  SECTION("ENOENT") {
    io->Fail(FileOp::kOpen, "/data/f", ENOENT, 0, 1);
    CHECK(ReadFile(*tier, 1, &err).empty());
    CHECK(err == -ENOENT);
  }
  CHECK(io->injected(FileOp::kOpen) == 1);
  // Nothing kept of the failure: the next read opens the file and serves it,
  // and the one after finds it open.
  const uint64_t opens = io->calls(FileOp::kOpen);
  CHECK(ReadFile(*tier, 1, &err) == BytesOf(1, kLength));
  CHECK(err == 0);
  CHECK(ReadFile(*tier, 1, &err) == BytesOf(1, kLength));
  CHECK(io->calls(FileOp::kOpen) == opens + 1);
}

TEST_CASE("DirectoryTier: reads of many files racing removes and stores see the chunk or nothing",
          "[directory_tier][open_files]") {
  TempTree dir;
  auto tier = Fresh(dir, NewPosixFileIo());
  const int files = static_cast<int>(TierFilesKeptOpen()) * 2;  // evictions as well
  for (int i = 1; i <= files; ++i) StoreFile(*tier, i);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, served{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&, t] {
      std::string scratch(kLength, '\0');
      for (int round = 0; !stop; ++round) {
        const int i = 1 + (round * 7 + t * 13) % files;
        TierRead out;
        if (tier->Read(ChunkKey{NodeId(i), 0}, 0, kLength, scratch.data(), &out) != 0) continue;
        served++;
        if (std::string(out.data, out.size) != BytesOf(i, kLength)) wrong++;
      }
    });
  }
  for (int round = 0; round < 2000; ++round) {
    const int i = 1 + (round * 11) % files;
    tier->Release(tier->Remove(ChunkKey{NodeId(i), 0}));
    StoreFile(*tier, i);
  }
  stop = true;
  for (auto& r : readers) r.join();
  CHECK(wrong == 0);
  INFO("reads served " << served.load());
  for (int i = 1; i <= files; ++i) tier->Release(tier->Remove(ChunkKey{NodeId(i), 0}));
  CHECK(DeletedTierFds(dir).empty());
}

}  // namespace
}  // namespace tierfs
