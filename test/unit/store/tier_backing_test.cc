// Tier::OpenBacking, the backing files of FUSE passthrough: a RAM tier's
// memory files (UseMemoryFiles) and a directory tier's chunk files hold a
// whole file at its own offsets, and keep their bytes after Remove.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <string>

#include "chunk_files.h"
#include "temp_tree.h"
#include "tiering/io/file_io.h"
#include "tiering/store/tier.h"

namespace tierfs {
namespace {

// Chunk `chunk` of a file of `file_size` bytes, `length` of them in it.
ChunkOrigin PartOf(uint64_t file_size, uint32_t chunk, uint64_t length) {
  return ChunkOrigin{"f", file_size, 0, chunk, length};
}

void StoreAs(Tier& tier, ChunkKey key, const ChunkOrigin& origin, const std::string& data) {
  std::unique_ptr<ChunkWriter> writer;
  REQUIRE(tier.BeginStore(key, origin, &writer) == 0);
  REQUIRE(writer->Append(data.data(), data.size()) == 0);
  REQUIRE(writer->Commit() == 0);
}

// All of the file behind `fd` (closed here), read with pread.
std::string Contents(int fd) {
  REQUIRE(fd >= 0);
  struct stat st;
  REQUIRE(::fstat(fd, &st) == 0);
  std::string out(static_cast<size_t>(st.st_size), '\0');
  REQUIRE(::pread(fd, out.data(), out.size(), 0) == static_cast<ssize_t>(out.size()));
  ::close(fd);
  return out;
}

TEST_CASE("MemoryTier keeps a whole file in a sealed memory file it hands out",
          "[tier][memory_tier]") {
  auto tier = NewMemoryTier("ram", 1 << 20);
  const std::string data = testing::BytesOf(7, 30000);
  const ChunkKey key{1, 0};
  SECTION("without UseMemoryFiles, no backing file") {
    StoreAs(*tier, key, PartOf(data.size(), 0, data.size()), data);
    CHECK(tier->OpenBacking(key) == -EOPNOTSUPP);
  }
  SECTION("with it") {
    tier->UseMemoryFiles(2);
    StoreAs(*tier, key, PartOf(data.size(), 0, data.size()), data);
    int fd = tier->OpenBacking(key);
    REQUIRE(fd >= 0);
    // Sealed: a holder of the descriptor cannot change, grow or shrink it.
    CHECK(::pwrite(fd, "x", 1, 0) < 0);
    CHECK(::ftruncate(fd, 1) != 0);
    CHECK(Contents(fd) == data);
    // Reads copy out of it.
    std::string scratch(100, '\0');
    TierRead r;
    REQUIRE(tier->Read(key, 1000, 100, scratch.data(), &r) == 0);
    CHECK(std::string(r.data, r.size) == data.substr(1000, 100));
    // Removed while a descriptor is open: its bytes stay.
    fd = tier->OpenBacking(key);
    CHECK(tier->Remove(key) == data.size());
    CHECK(tier->OpenBacking(key) == -ENOENT);
    CHECK(Contents(fd) == data);
  }
  SECTION("only for chunks that are whole files, and at most max_files") {
    tier->UseMemoryFiles(1);
    StoreAs(*tier, ChunkKey{2, 0}, PartOf(2 * data.size(), 0, data.size()), data);
    CHECK(tier->OpenBacking(ChunkKey{2, 0}) == -EOPNOTSUPP);  // a chunk of a larger file
    StoreAs(*tier, key, PartOf(data.size(), 0, data.size()), data);
    StoreAs(*tier, ChunkKey{3, 0}, PartOf(data.size(), 0, data.size()), data);
    int fd = tier->OpenBacking(key);
    CHECK(Contents(fd) == data);
    CHECK(tier->OpenBacking(ChunkKey{3, 0}) == -EOPNOTSUPP);  // the one file was taken
    // Its file given back, the next whole file gets one.
    CHECK(tier->Remove(key) == data.size());
    StoreAs(*tier, ChunkKey{4, 0}, PartOf(data.size(), 0, data.size()), data);
    CHECK(Contents(tier->OpenBacking(ChunkKey{4, 0})) == data);
  }
}

TEST_CASE("MemoryTier serves a memory file's bytes while it is written", "[tier][memory_tier]") {
  auto tier = NewMemoryTier("ram", 1 << 20);
  tier->UseMemoryFiles(4);
  const std::string data = testing::BytesOf(5, 20000);
  const ChunkKey key{5, 0};
  std::unique_ptr<ChunkWriter> writer;
  REQUIRE(tier->BeginStore(key, PartOf(data.size(), 0, data.size()), &writer) == 0);
  REQUIRE(writer->Append(data.data(), 8000) == 0);
  std::shared_ptr<const void> hold;
  const char* early = writer->Contents(&hold);
  REQUIRE(early != nullptr);
  CHECK(std::string(early, 8000) == data.substr(0, 8000));
  REQUIRE(writer->Append(data.data() + 8000, data.size() - 8000) == 0);
  REQUIRE(writer->Commit() == 0);
  // The early reader's bytes stay readable after the publication.
  CHECK(std::string(early, data.size()) == data);
  hold.reset();
  int fd = tier->OpenBacking(key);
  CHECK(::pwrite(fd, "x", 1, 0) < 0);  // sealed
  CHECK(Contents(fd) == data);
}

TEST_CASE("DirectoryTier hands out its chunk file, which keeps its bytes after Remove",
          "[directory_tier]") {
  testing::TempTree dir;
  auto tier = testing::OpenTier(dir, 1 << 20, NewPosixFileIo());
  tier->Recover(testing::AcceptAll);
  const std::string data = testing::BytesOf(3, 50000);
  const ChunkKey key{3, 0};
  testing::Store(*tier, key, testing::OriginOf(3, data.size()), data);
  CHECK(tier->OpenBacking(ChunkKey{9, 0}) == -ENOENT);
  int fd = tier->OpenBacking(key);
  REQUIRE(fd >= 0);
  CHECK((::fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
  CHECK(tier->Remove(key) == data.size());
  CHECK(tier->OpenBacking(key) == -ENOENT);
  CHECK(Contents(fd) == data);  // unlinked, not rewritten
}

}  // namespace
}  // namespace tierfs
