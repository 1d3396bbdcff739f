// The directory tier's tier files: one sparse file per SOURCE file, each
// chunk at its own offset. Several chunks share a file; removing one frees
// its blocks (a hole), removing the last unlinks the file; a read racing a
// removal never returns a hole's zeros; recovery keeps only whole ranges and
// frees the rest; a file system that cannot punch holes is refused.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <string>
#include <thread>

#include "chunk_files.h"
#include "fault_file_io.h"
#include "hooked_tier_io.h"
#include "temp_tree.h"
#include "tiering/io/file_io.h"
#include "tiering/store/tier.h"

namespace tierfs {
namespace {

using testing::BytesOf;
using testing::DataFiles;
using testing::FaultFileIo;
using testing::FileOp;
using testing::OpenTier;
using testing::TempTree;

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kFileSize = 3 * kChunk - 1000;  // three chunks, the last short

// Chunk c of SOURCE file "file<i>" (kFileSize bytes).
ChunkOrigin ChunkOf(int i, uint32_t c) {
  const uint64_t offset = c * kChunk;
  return ChunkOrigin{fmt::format("file{}", i),
                     kFileSize,
                     1000 + i,
                     c,
                     std::min(kChunk, kFileSize - offset),
                     0,
                     0,
                     offset};
}
std::string FileBytes(int i) { return BytesOf(i, kFileSize); }
std::string ChunkBytes(int i, uint32_t c) {
  const ChunkOrigin o = ChunkOf(i, c);
  return FileBytes(i).substr(o.offset, o.length);
}
// Accepts "file<i>" chunk c as key {i, c}.
std::optional<ChunkKey> AcceptChunks(const ChunkOrigin& o) {
  return ChunkKey{static_cast<NodeId>(std::stoi(o.path.substr(4))), o.chunk};
}
void StoreChunk(DirectoryTier& tier, int i, uint32_t c) {
  testing::Store(tier, ChunkKey{NodeId(i), c}, ChunkOf(i, c), ChunkBytes(i, c));
}
std::string ReadChunk(Tier& tier, int i, uint32_t c, int* err) {
  return testing::ReadAll(tier, ChunkKey{NodeId(i), c}, kChunk, err);
}
// The one tier file in data/, and the bytes allocated to it.
std::string OnlyFile(const TempTree& dir) {
  auto names = DataFiles(dir);
  REQUIRE(names.size() == 1);
  return dir.Abs("data/" + *names.begin());
}
uint64_t Allocated(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}
std::string Bytes(const std::string& path, uint64_t off, size_t n) {
  std::string out(n, '\0');
  int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pread(fd, out.data(), n, static_cast<off_t>(off)) == static_cast<ssize_t>(n));
  ::close(fd);
  return out;
}
void Punch(const std::string& path, uint64_t off, uint64_t n) {
  int fd = ::open(path.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
                      static_cast<off_t>(n)) == 0);
  ::close(fd);
}
std::unique_ptr<DirectoryTier> Fresh(const TempTree& dir, std::shared_ptr<FileIo> io = nullptr) {
  auto tier = OpenTier(dir, 1 << 20, io ? io : NewPosixFileIo());
  REQUIRE(tier->Recover(AcceptChunks).empty());
  return tier;
}

TEST_CASE("DirectoryTier keeps a file's chunks in one tier file at their offsets",
          "[directory_tier]") {
  TempTree dir;
  auto tier = Fresh(dir);
  for (uint32_t c : {2u, 0u, 1u}) StoreChunk(*tier, 1, c);
  StoreChunk(*tier, 2, 0);
  CHECK(tier->chunks() == 4);
  CHECK(DataFiles(dir).size() == 2);  // one per SOURCE file, not per chunk
  int err = 0;
  for (uint32_t c = 0; c < 3; ++c) CHECK(ReadChunk(*tier, 1, c, &err) == ChunkBytes(1, c));
  tier->Remove(ChunkKey{2, 0});
  const std::string file = OnlyFile(dir);
  struct stat st;
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK(static_cast<uint64_t>(st.st_size) == kFileSize);
  CHECK(Bytes(file, 0, kFileSize) == FileBytes(1));
}

TEST_CASE("DirectoryTier frees a removed chunk's blocks and unlinks an emptied file",
          "[directory_tier]") {
  TempTree dir;
  auto tier = Fresh(dir);
  for (uint32_t c = 0; c < 3; ++c) StoreChunk(*tier, 1, c);
  const std::string file = OnlyFile(dir);
  const uint64_t whole = Allocated(file);
  CHECK(tier->Remove(ChunkKey{1, 1}) == kChunk);
  CHECK(Allocated(file) <= whole - kChunk);  // a hole where chunk 1 was
  CHECK(Bytes(file, kChunk, kChunk) == std::string(kChunk, '\0'));
  int err = 0;
  ReadChunk(*tier, 1, 1, &err);
  CHECK(err == -ENOENT);
  CHECK(ReadChunk(*tier, 1, 0, &err) == ChunkBytes(1, 0));
  CHECK(ReadChunk(*tier, 1, 2, &err) == ChunkBytes(1, 2));
  // Stored again: into the same file, at the same offset.
  StoreChunk(*tier, 1, 1);
  CHECK(OnlyFile(dir) == file);
  CHECK(ReadChunk(*tier, 1, 1, &err) == ChunkBytes(1, 1));
  for (uint32_t c = 0; c < 3; ++c) tier->Remove(ChunkKey{1, c});
  CHECK(DataFiles(dir).empty());
  // A chunk of the file after it was emptied: a new tier file.
  StoreChunk(*tier, 1, 2);
  CHECK(OnlyFile(dir) != file);
  CHECK(ReadChunk(*tier, 1, 2, &err) == ChunkBytes(1, 2));
}

TEST_CASE("DirectoryTier: a writer that fails frees what it wrote", "[directory_tier][faults]") {
  TempTree dir;
  auto io = std::make_shared<FaultFileIo>(NewPosixFileIo());
  auto tier = Fresh(dir, io);
  StoreChunk(*tier, 1, 0);
  const std::string file = OnlyFile(dir);
  const uint64_t before = Allocated(file);
  io->Fail(FileOp::kWrite, "/data/f", ENOSPC, 1);  // the first half goes, the second not
  REQUIRE(tier->Reserve(kChunk));
  std::unique_ptr<ChunkWriter> writer;
  REQUIRE(tier->BeginStore(ChunkKey{1, 1}, ChunkOf(1, 1), &writer) == 0);
  const std::string bytes = ChunkBytes(1, 1);
  CHECK(writer->Append(bytes.data(), kChunk / 2) == 0);
  CHECK(Allocated(file) > before);
  CHECK(writer->Append(bytes.data() + kChunk / 2, kChunk / 2) == -ENOSPC);
  CHECK(writer->Commit() == -ENOSPC);
  CHECK(Allocated(file) <= before);  // the half written is punched
  CHECK(tier->chunks() == 1);
  int err = 0;
  CHECK(ReadChunk(*tier, 1, 0, &err) == ChunkBytes(1, 0));
}

TEST_CASE("DirectoryTier: a punch that fails frees the range at the next mount",
          "[directory_tier][faults]") {
  TempTree dir;
  auto io = std::make_shared<FaultFileIo>(NewPosixFileIo());
  auto tier = Fresh(dir, io);
  for (uint32_t c = 0; c < 3; ++c) StoreChunk(*tier, 1, c);
  const std::string file = OnlyFile(dir);
  const uint64_t whole = Allocated(file);
  io->Fail(FileOp::kPunch, "/data/f", EIO, 0, 1);
  CHECK(tier->Remove(ChunkKey{1, 1}) == kChunk);  // gone from the tier all the same
  CHECK(io->injected(FileOp::kPunch) == 1);
  CHECK(Allocated(file) == whole);  // not freed yet
  int err = 0;
  ReadChunk(*tier, 1, 1, &err);
  CHECK(err == -ENOENT);  // never served
  tier.reset();
  auto again = OpenTier(dir, 1 << 20, NewPosixFileIo());
  CHECK(again->Recover(AcceptChunks).size() == 2);
  CHECK(Allocated(file) <= whole - kChunk);  // its "R" line: punched at recovery
}

TEST_CASE("DirectoryTier: a read racing a removal never returns the hole's zeros",
          "[directory_tier]") {
  TempTree dir;
  auto io = std::make_shared<testing::HookedTierIo>();
  auto tier = Fresh(dir, io);
  for (uint32_t c = 0; c < 3; ++c) StoreChunk(*tier, 1, c);
  // The removal lands between the lookup and the pread: its range is a hole
  // (the file stays: chunks 0 and 2 are in it) when the bytes are read.
  io->in_read = [&] { CHECK(tier->Remove(ChunkKey{1, 1}) == kChunk); };
  int err = 0;
  const std::string got = ReadChunk(*tier, 1, 1, &err);
  CHECK(io->in_read == nullptr);  // the removal ran
  CHECK(err == -ENOENT);          // not kChunk zeros: the caller reads SOURCE
  CHECK(got.empty());
}

TEST_CASE("DirectoryTier: reads racing removes and stores see the chunk or nothing",
          "[directory_tier]") {
  TempTree dir;
  auto tier = Fresh(dir);
  for (uint32_t c = 0; c < 3; ++c) StoreChunk(*tier, 1, c);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, served{0};
  std::thread reader([&] {
    const std::string want = ChunkBytes(1, 1);
    std::string scratch(kChunk, '\0');
    while (!stop) {
      TierRead out;
      if (tier->Read(ChunkKey{1, 1}, 0, kChunk, scratch.data(), &out) != 0) continue;
      served++;
      if (std::string(out.data, out.size) != want) wrong++;
    }
  });
  for (int round = 0; round < 300; ++round) {
    tier->Release(tier->Remove(ChunkKey{1, 1}));
    StoreChunk(*tier, 1, 1);
  }
  stop = true;
  reader.join();
  CHECK(wrong == 0);
  INFO("reads served " << served.load());
}

TEST_CASE("DirectoryTier recovery keeps only whole ranges and frees the rest", "[directory_tier]") {
  TempTree dir;
  std::string file;
  {
    auto tier = Fresh(dir);
    for (uint32_t c = 0; c < 3; ++c) StoreChunk(*tier, 1, c);
    file = OnlyFile(dir);
  }
  SECTION("a chunk whose range has a hole (its removal's record was lost) is dropped") {
    Punch(file, kChunk + 4096, 4096);
    auto tier = OpenTier(dir, 1 << 20, NewPosixFileIo());
    auto kept = tier->Recover(AcceptChunks);
    CHECK(kept.size() == 2);
    int err = 0;
    ReadChunk(*tier, 1, 1, &err);
    CHECK(err == -ENOENT);
    CHECK(ReadChunk(*tier, 1, 2, &err) == ChunkBytes(1, 2));
    CHECK(Bytes(file, kChunk, kChunk) == std::string(kChunk, '\0'));  // all of its range freed
    CHECK(tier->used() == kChunk + ChunkOf(1, 2).length);
  }
  SECTION("a range no record names (a writer cut off by a crash) is punched") {
    {
      auto tier = OpenTier(dir, 1 << 20, NewPosixFileIo());
      REQUIRE(tier->Recover(AcceptChunks).size() == 3);
      tier->Remove(ChunkKey{1, 1});
    }
    int fd = ::open(file.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    const std::string junk(kChunk / 2, 'j');
    REQUIRE(::pwrite(fd, junk.data(), junk.size(), kChunk) == static_cast<ssize_t>(junk.size()));
    ::close(fd);
    const uint64_t with_junk = Allocated(file);
    auto tier = OpenTier(dir, 1 << 20, NewPosixFileIo());
    CHECK(tier->Recover(AcceptChunks).size() == 2);
    CHECK(Allocated(file) <= with_junk - junk.size());
    CHECK(Bytes(file, kChunk, kChunk) == std::string(kChunk, '\0'));
  }
  SECTION("a torn last record: its chunk is dropped and its range freed") {
    std::string journal =
        Bytes(dir.Abs("journal"), 0, std::filesystem::file_size(dir.Abs("journal")));
    REQUIRE(journal.ends_with("file1\n"));
    dir.Write("journal", journal.substr(0, journal.size() - 1));
    auto tier = OpenTier(dir, 1 << 20, NewPosixFileIo());
    CHECK(tier->Recover(AcceptChunks).size() == 2);
    int err = 0;
    ReadChunk(*tier, 1, 2, &err);  // the last one published
    CHECK(err == -ENOENT);
    CHECK(Bytes(file, 2 * kChunk, kFileSize - 2 * kChunk) ==
          std::string(kFileSize - 2 * kChunk, '\0'));
  }
  SECTION("a tier file of another size keeps nothing and is unlinked") {
    dir.Truncate("data/" + file.substr(file.rfind('/') + 1), kFileSize + 1);
    auto tier = OpenTier(dir, 1 << 20, NewPosixFileIo());
    CHECK(tier->Recover(AcceptChunks).empty());
    CHECK(DataFiles(dir).empty());
  }
}

TEST_CASE("OpenDirectoryTier refuses a file system that cannot punch holes",
          "[directory_tier][faults]") {
  TempTree dir;
  auto io = std::make_shared<FaultFileIo>(NewPosixFileIo());
  io->Fail(FileOp::kPunch, "/data/", EOPNOTSUPP);
  Status refused = OpenDirectoryTier(io, "nvme", dir.root(), 1 << 20, false).status();
  CHECK(refused.code() == EOPNOTSUPP);
  CHECK_THAT(refused.message(), Catch::Contains(dir.root()) && Catch::Contains("punch holes"));
  CHECK(DataFiles(dir).empty());  // the probe is gone
  io->Heal();
  io->Fail(FileOp::kWrite, "/data/", ENOSPC);  // a full device refuses nothing
  CHECK(OpenDirectoryTier(io, "nvme", dir.root(), 1 << 20, false).ok());
}

}  // namespace
}  // namespace tierfs
