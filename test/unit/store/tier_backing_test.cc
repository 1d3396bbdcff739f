// Tier::PinBacking, the backing files of FUSE passthrough: a RAM tier's
// memory files (UseMemoryFiles, one per file) and a directory tier's tier
// files (one per file) hold a whole file at its own offsets, and keep their
// bytes after Remove while pinned.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <string>
#include <vector>

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

// The backing file of node `id` of `size` bytes, pinned: a descriptor
// (closed by Contents) and the token in *token; -errno if none.
int PinAndOpen(Tier& tier, NodeId id, uint64_t size, uint64_t* token) {
  if (int err = tier.PinBacking(id, size, token); err < 0) return err;
  return tier.OpenBacking(id, *token);
}

// Bytes [off, off+n) of the file behind `fd`, which stays open.
std::string Range(int fd, uint64_t off, size_t n) {
  std::string out(n, '\0');
  REQUIRE(::pread(fd, out.data(), n, static_cast<off_t>(off)) == static_cast<ssize_t>(n));
  return out;
}

// Bytes of memory allocated to the file behind `fd`.
uint64_t Allocated(int fd) {
  struct stat st;
  REQUIRE(::fstat(fd, &st) == 0);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

TEST_CASE("MemoryTier keeps each file in one memory file it hands out", "[tier][memory_tier]") {
  auto tier = NewMemoryTier("ram", 1 << 20);
  const std::string data = testing::BytesOf(7, 30000);
  const ChunkKey key{1, 0};
  uint64_t token = 0;
  SECTION("without UseMemoryFiles, no backing file") {
    StoreAs(*tier, key, PartOf(data.size(), 0, data.size()), data);
    CHECK(tier->PinBacking(1, data.size(), &token) == -EOPNOTSUPP);
  }
  SECTION("with it") {
    tier->UseMemoryFiles(2);
    StoreAs(*tier, key, PartOf(data.size(), 0, data.size()), data);
    CHECK(tier->PinBacking(1, data.size() + 1, &token) == -ENOENT);  // not the file's size
    int fd = PinAndOpen(*tier, 1, data.size(), &token);
    REQUIRE(fd >= 0);
    // Sealed: a holder of the descriptor cannot grow or shrink it.
    CHECK(::ftruncate(fd, 1) != 0);
    CHECK(::ftruncate(fd, 1 << 20) != 0);
    // Reads copy out of it.
    std::string scratch(100, '\0');
    TierRead r;
    REQUIRE(tier->Read(key, 1000, 100, scratch.data(), &r) == 0);
    CHECK(std::string(r.data, r.size) == data.substr(1000, 100));
    // Removed while pinned: its bytes stay until the last unpin.
    CHECK(tier->Remove(key) == data.size());
    uint64_t again = 0;
    CHECK(tier->PinBacking(1, data.size(), &again) == -ENOENT);
    CHECK(Range(fd, 0, data.size()) == data);
    tier->UnpinBacking(1, token);
    CHECK(Range(fd, 0, data.size()) == std::string(data.size(), '\0'));  // freed
    ::close(fd);
  }
  SECTION("at most max_files files") {
    tier->UseMemoryFiles(1);
    StoreAs(*tier, key, PartOf(data.size(), 0, data.size()), data);
    StoreAs(*tier, ChunkKey{3, 0}, PartOf(data.size(), 0, data.size()), data);
    int fd = PinAndOpen(*tier, 1, data.size(), &token);
    tier->UnpinBacking(1, token);
    CHECK(Contents(fd) == data);
    CHECK(tier->PinBacking(3, data.size(), &token) == -ENOENT);  // the one file was taken
    // Its file given back, the next file gets one, under another token.
    CHECK(tier->Remove(key) == data.size());
    StoreAs(*tier, ChunkKey{4, 0}, PartOf(data.size(), 0, data.size()), data);
    uint64_t other = 0;
    CHECK(Contents(PinAndOpen(*tier, 4, data.size(), &other)) == data);
    CHECK(other != token);
  }
}

TEST_CASE("MemoryTier puts a file's chunks at their offsets of one memory file",
          "[tier][memory_tier]") {
  auto tier = NewMemoryTier("ram", 1 << 20);
  tier->UseMemoryFiles(4);
  const uint64_t chunk = 16384;  // four pages: chunks start on page boundaries
  const std::string data = testing::BytesOf(11, 3 * chunk + 1000);
  auto store = [&](uint32_t c) {
    const uint64_t off = c * chunk, n = std::min<uint64_t>(chunk, data.size() - off);
    ChunkOrigin origin = PartOf(data.size(), c, n);
    origin.offset = off;
    StoreAs(*tier, ChunkKey{2, c}, origin, data.substr(off, n));
  };
  uint64_t token = 0;
  store(0);
  store(2);
  CHECK(tier->PinBacking(2, data.size(), &token) == -ENOENT);  // not all of it yet
  store(1);
  store(3);
  CHECK(tier->chunks() == 4);
  int fd = PinAndOpen(*tier, 2, data.size(), &token);
  REQUIRE(fd >= 0);
  CHECK(Range(fd, 0, data.size()) == data);
  tier->UnpinBacking(2, token);
  // Each chunk reads from its own range.
  std::string scratch(100, '\0');
  TierRead r;
  REQUIRE(tier->Read(ChunkKey{2, 2}, 10, 100, scratch.data(), &r) == 0);
  CHECK(std::string(r.data, r.size) == data.substr(2 * chunk + 10, 100));
  // Removing a chunk frees its range (a hole) and nothing else.
  const uint64_t before = Allocated(fd);
  CHECK(tier->Remove(ChunkKey{2, 1}) == chunk);
  CHECK(Allocated(fd) <= before - chunk);
  CHECK(Range(fd, chunk, chunk) == std::string(chunk, '\0'));
  CHECK(Range(fd, 2 * chunk, chunk) == data.substr(2 * chunk, chunk));
  CHECK(tier->PinBacking(2, data.size(), &token) == -ENOENT);
  // Stored again: the same memory file, whole again.
  store(1);
  uint64_t again = 0;
  REQUIRE(tier->PinBacking(2, data.size(), &again) == 0);
  CHECK(again == token);
  CHECK(Range(fd, 0, data.size()) == data);
  tier->UnpinBacking(2, again);
  ::close(fd);
}

TEST_CASE("MemoryTier frees a removed chunk's range only when its readers are done",
          "[tier][memory_tier]") {
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
  // The early reader's bytes stay readable after the publication, and
  // after the chunk's removal while the reader holds them.
  CHECK(std::string(early, data.size()) == data);
  CHECK(tier->Remove(key) == data.size());
  CHECK(std::string(early, data.size()) == data);
  hold.reset();
  // A writer given up frees its range too (then the file goes: none held).
  REQUIRE(tier->BeginStore(key, PartOf(data.size(), 0, data.size()), &writer) == 0);
  REQUIRE(writer->Append(data.data(), 100) == 0);
  writer->Abort();
  uint64_t token = 0;
  CHECK(tier->PinBacking(5, data.size(), &token) == -ENOENT);
  CHECK(tier->chunks() == 0);
}

TEST_CASE("MemoryTier keeps its files in a tmpfs of its own when given one",
          "[tier][memory_tier]") {
  const int fs = NewHugePageMemoryFs();
  if (fs < 0) {
    CHECK(fs == -EPERM);  // not root: the daemon then uses memfds
    return;
  }
  auto tier = NewMemoryTier("ram", 8 << 20);
  tier->UseMemoryFiles(4, fs);
  ::close(fs);  // the tier keeps its own descriptor
  const uint64_t chunk = 1 << 20;
  const std::string data = testing::BytesOf(13, 3 * chunk - 10);
  for (uint32_t c = 0; c < 3; ++c) {
    const uint64_t off = c * chunk, n = std::min<uint64_t>(chunk, data.size() - off);
    ChunkOrigin origin = PartOf(data.size(), c, n);
    origin.offset = off;
    StoreAs(*tier, ChunkKey{6, c}, origin, data.substr(off, n));
  }
  uint64_t token = 0;
  int fd = PinAndOpen(*tier, 6, data.size(), &token);
  REQUIRE(fd >= 0);
  CHECK(Range(fd, 0, data.size()) == data);
  tier->UnpinBacking(6, token);
  CHECK(tier->Remove(ChunkKey{6, 1}) == chunk);
  CHECK(Range(fd, chunk, chunk) == std::string(chunk, '\0'));  // freed
  ::close(fd);
}

TEST_CASE("Tiers tell of each chunk removed", "[tier][memory_tier]") {
  auto tier = NewMemoryTier("ram", 1 << 20);
  std::vector<NodeId> told;
  tier->OnRemoved([&told](NodeId id) { told.push_back(id); });
  const std::string data = testing::BytesOf(1, 100);
  StoreAs(*tier, ChunkKey{8, 0}, PartOf(data.size(), 0, data.size()), data);
  CHECK(tier->Remove(ChunkKey{9, 0}) == 0);  // none: not told
  CHECK(tier->Remove(ChunkKey{8, 0}) == data.size());
  CHECK(told == std::vector<NodeId>{8});
}

// A file of three chunks in a directory tier: chunk c of `data` at offset c * chunk.
void StoreThree(DirectoryTier& tier, NodeId id, const std::string& data, uint64_t chunk) {
  for (uint32_t c = 0; c < 3; ++c) {
    const uint64_t off = c * chunk, n = std::min<uint64_t>(chunk, data.size() - off);
    ChunkOrigin origin = PartOf(data.size(), c, n);
    origin.offset = off;
    REQUIRE(tier.Reserve(n));
    StoreAs(tier, ChunkKey{id, c}, origin, data.substr(off, n));
  }
}

TEST_CASE("DirectoryTier hands out a file's tier file once it holds every chunk",
          "[directory_tier]") {
  testing::TempTree dir;
  auto tier = testing::OpenTier(dir, 1 << 20, NewPosixFileIo());
  tier->Recover(testing::AcceptAll);
  const uint64_t chunk = 64 * 1024;
  const std::string data = testing::BytesOf(3, 3 * chunk - 100);
  uint64_t token = 0;
  SECTION("not before") {
    REQUIRE(tier->Reserve(chunk));
    ChunkOrigin first = PartOf(data.size(), 0, chunk);
    StoreAs(*tier, ChunkKey{3, 0}, first, data.substr(0, chunk));
    CHECK(tier->PinBacking(3, data.size(), &token) == -ENOENT);  // one chunk of three
  }
  SECTION("then the kernel reads it whole") {
    StoreThree(*tier, 3, data, chunk);
    CHECK(tier->PinBacking(9, data.size(), &token) == -ENOENT);
    CHECK(tier->PinBacking(3, data.size() + 1, &token) == -ENOENT);  // another size
    int fd = PinAndOpen(*tier, 3, data.size(), &token);
    REQUIRE(fd >= 0);
    CHECK((::fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
    CHECK(tier->OpenBacking(3, token + 1) == -ENOENT);
    tier->UnpinBacking(3, token);
    CHECK(Contents(fd) == data);
  }
}

// A directory tier holding file `id` whole (three chunks of kChunk bytes),
// its tier file pinned and opened (fd) with `whole` bytes allocated.
struct PinnedThree {
  static constexpr uint64_t kChunk = 64 * 1024;
  explicit PinnedThree(NodeId id)
      : tier(testing::OpenTier(dir, 1 << 20, NewPosixFileIo())),
        data(testing::BytesOf(static_cast<int>(id), 3 * kChunk)) {
    tier->Recover(testing::AcceptAll);
    StoreThree(*tier, id, data, kChunk);
    fd = PinAndOpen(*tier, id, data.size(), &token);
    REQUIRE(fd >= 0);
    whole = Allocated(fd);
  }
  testing::TempTree dir;
  std::unique_ptr<DirectoryTier> tier;
  const std::string data;
  uint64_t token = 0;
  int fd = -1;
  uint64_t whole = 0;
};

TEST_CASE("DirectoryTier punches nothing and unlinks nothing of a pinned tier file",
          "[directory_tier]") {
  PinnedThree p(4);
  const uint64_t chunk = PinnedThree::kChunk;
  std::vector<NodeId> told;
  p.tier->OnRemoved([&told](NodeId id) { told.push_back(id); });
  CHECK(p.tier->Remove(ChunkKey{4, 1}) == chunk);
  CHECK(told == std::vector<NodeId>{4});
  CHECK(Allocated(p.fd) == p.whole);  // the punch waits for the last unpin
  CHECK(Range(p.fd, 0, p.data.size()) == p.data);
  uint64_t second = 0;
  CHECK(p.tier->PinBacking(4, p.data.size(), &second) == -ENOENT);  // no longer whole
  CHECK(p.tier->Remove(ChunkKey{4, 0}) == chunk);
  CHECK(p.tier->Remove(ChunkKey{4, 2}) == chunk);
  CHECK(testing::DataFiles(p.dir).size() == 1);  // no chunk left, but pinned: kept
  CHECK(Range(p.fd, 0, p.data.size()) == p.data);
  p.tier->UnpinBacking(4, p.token);
  CHECK(testing::DataFiles(p.dir).empty());  // unlinked at the last unpin
  ::close(p.fd);
}

TEST_CASE("DirectoryTier punches the ranges removed while pinned at the last unpin",
          "[directory_tier]") {
  PinnedThree p(5);
  const uint64_t chunk = PinnedThree::kChunk;
  uint64_t second = 0;
  REQUIRE(p.tier->PinBacking(5, p.data.size(), &second) == 0);  // two opens: two pins
  CHECK(p.tier->Remove(ChunkKey{5, 1}) == chunk);
  p.tier->UnpinBacking(5, p.token);
  CHECK(Allocated(p.fd) == p.whole);  // one pin left
  p.tier->UnpinBacking(5, second);
  CHECK(Allocated(p.fd) <= p.whole - chunk);  // freed
  CHECK(Range(p.fd, chunk, chunk) == std::string(chunk, '\0'));
  CHECK(Range(p.fd, 0, chunk) == p.data.substr(0, chunk));
  CHECK(testing::DataFiles(p.dir).size() == 1);  // chunks 0 and 2 are still in it
  ::close(p.fd);
}

}  // namespace
}  // namespace tierfs
