// The directory tier (OpenDirectoryTier): publication, Abort, Recover after a
// restart, reset, the lock against a second daemon, unusable paths.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "chunk_files.h"
#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/io/file_io.h"
#include "tiering/store/tier.h"

namespace tierfs {
namespace {

using testing::AcceptAll;
using testing::BytesOf;
using testing::DataFiles;
using testing::OriginOf;
using testing::Populate;
using testing::ReadAll;
using testing::Store;
using testing::TempTree;

std::unique_ptr<DirectoryTier> Open(const TempTree& dir, uint64_t budget, bool reset = false) {
  return OpenTier(dir, budget, NewPosixFileIo(), reset);
}

TEST_CASE("DirectoryTier stores and reads a chunk", "[directory_tier]") {
  TempTree dir;
  auto tier = Open(dir, 1 << 20);
  CHECK(tier->kind() == Tier::Kind::kDirectory);
  CHECK(tier->path() == dir.root());
  CHECK(tier->Recover(AcceptAll).empty());
  const std::string data = BytesOf(1, 10000);
  Store(*tier, ChunkKey{1, 0}, OriginOf(1, data.size()), data);
  CHECK(tier->chunks() == 1);

  int err = 0;
  CHECK(ReadAll(*tier, ChunkKey{1, 0}, data.size(), &err) == data);
  std::string scratch(100, '\0');
  TierRead out;
  REQUIRE(tier->Read(ChunkKey{1, 0}, 9950, 100, scratch.data(), &out) == 0);
  CHECK(out.data == scratch.data());  // copied into the caller's scratch
  CHECK(std::string(out.data, out.size) == data.substr(9950));
  CHECK(tier->Read(ChunkKey{2, 0}, 0, 1, scratch.data(), &out) == -ENOENT);

  CHECK(tier->Remove(ChunkKey{1, 0}) == data.size());
  CHECK(tier->Remove(ChunkKey{1, 0}) == 0);
  CHECK(tier->chunks() == 0);
  CHECK(DataFiles(dir).empty());
}

TEST_CASE("DirectoryTier shows nothing before Commit, Abort leaves no file", "[directory_tier]") {
  TempTree dir;
  auto tier = Open(dir, 1 << 20);
  tier->Recover(AcceptAll);
  const std::string data = BytesOf(1, 5000);
  int err = 0;
  std::unique_ptr<ChunkWriter> writer;
  REQUIRE(tier->BeginStore(ChunkKey{1, 0}, OriginOf(1, data.size()), &writer) == 0);
  REQUIRE(writer->Append(data.data(), data.size()) == 0);
  CHECK(tier->chunks() == 0);
  ReadAll(*tier, ChunkKey{1, 0}, data.size(), &err);
  CHECK(err == -ENOENT);
  CHECK(DataFiles(dir).size() == 1);  // its tier file, made for the writer

  SECTION("Abort") {
    writer->Abort();
    writer->Abort();
    CHECK(DataFiles(dir).empty());
    CHECK(writer->Commit() < 0);
  }
  SECTION("destroyed without Commit") {
    writer.reset();
    CHECK(DataFiles(dir).empty());
  }
  SECTION("Commit of an incomplete chunk") {
    std::unique_ptr<ChunkWriter> short_writer;
    REQUIRE(tier->BeginStore(ChunkKey{2, 0}, OriginOf(2, 10), &short_writer) == 0);
    REQUIRE(short_writer->Append("abc", 3) == 0);
    CHECK(short_writer->Commit() < 0);
    writer->Abort();
    CHECK(DataFiles(dir).empty());
  }
  CHECK(tier->chunks() == 0);
}

TEST_CASE("DirectoryTier Recover keeps accepted complete chunks after a restart",
          "[directory_tier]") {
  TempTree dir;
  Populate(dir, 4, 1000)->Remove(ChunkKey{4, 0});  // journalled as removed
  auto tier = Open(dir, 1 << 20);
  std::vector<ChunkOrigin> seen;
  auto keys = tier->Recover([&](const ChunkOrigin& o) {
    seen.push_back(o);
    return AcceptAll(o);
  });
  CHECK(keys.size() == 3);
  CHECK(seen.size() == 3);
  for (const auto& o : seen) {
    int i = std::stoi(o.path.substr(4));
    CHECK(o.length == 1000);
    CHECK(o.file_size == 3000);
    CHECK(o.mtime_ns == 1000 + i);
    CHECK(o.chunk == 0);
  }
  CHECK(tier->used() == 3000);
  CHECK(tier->chunks() == 3);
  int err = 0;
  for (int i = 1; i <= 3; ++i)
    CHECK(ReadAll(*tier, ChunkKey{NodeId(i), 0}, 1000, &err) == BytesOf(i, 1000));
  ReadAll(*tier, ChunkKey{4, 0}, 1000, &err);
  CHECK(err == -ENOENT);

  // New chunks do not reuse the names of kept ones, and a third start keeps all.
  Store(*tier, ChunkKey{5, 0}, OriginOf(5, 1000), BytesOf(5, 1000));
  CHECK(DataFiles(dir).size() == 4);
  tier.reset();
  tier = Open(dir, 1 << 20);
  CHECK(tier->Recover(AcceptAll).size() == 4);
  for (int i : {1, 2, 3, 5})
    CHECK(ReadAll(*tier, ChunkKey{NodeId(i), 0}, 1000, &err) == BytesOf(i, 1000));
}

TEST_CASE("DirectoryTier Recover removes what it cannot trust", "[directory_tier]") {
  TempTree dir;
  std::map<int, std::string> file_of;  // chunk i -> its data file name
  Populate(dir, 4, 1000, &file_of);
  REQUIRE(file_of.size() == 4);
  dir.Truncate("data/" + file_of[2], 999);       // size disagrees with the journal
  dir.Write("data/f900.tmp", "partial");         // not a name the tier gives
  dir.Write("data/f901", std::string(10, 'x'));  // not in the journal
  dir.Write("data/c5", std::string(10, 'x'));    // a chunk file of an older tierfs
  dir.Write("data/junk", "?");                   // not ours at all

  auto tier = Open(dir, 1 << 20);
  auto keys = tier->Recover([](const ChunkOrigin& o) -> std::optional<ChunkKey> {
    if (o.path == "file3") return std::nullopt;  // stale: SOURCE changed
    return AcceptAll(o);
  });
  REQUIRE(keys.size() == 2);
  std::set<NodeId> kept = {keys[0].node, keys[1].node};
  CHECK(kept == std::set<NodeId>{1, 4});
  CHECK(DataFiles(dir) == std::set<std::string>{file_of[1], file_of[4]});
  CHECK(tier->used() == 2000);
  int err = 0;
  CHECK(ReadAll(*tier, ChunkKey{4, 0}, 1000, &err) == BytesOf(4, 1000));
  for (NodeId id : {2, 3}) {
    ReadAll(*tier, ChunkKey{id, 0}, 1000, &err);
    CHECK(err == -ENOENT);
  }
  // The rejected chunks are gone from the journal too: accepting everything
  // on the next start brings nothing back.
  tier.reset();
  tier = Open(dir, 1 << 20);
  CHECK(tier->Recover(AcceptAll).size() == 2);
}

TEST_CASE("DirectoryTier Recover honours the budget", "[directory_tier]") {
  TempTree dir;
  Populate(dir, 5, 1000);
  auto tier = Open(dir, 2500);  // room for two of the five
  auto keys = tier->Recover(AcceptAll);
  CHECK(keys.size() == 2);
  CHECK(tier->used() == 2000);
  CHECK(tier->used() <= tier->budget());
  CHECK(DataFiles(dir).size() == 2);
  int err = 0;
  for (ChunkKey key : keys) CHECK(ReadAll(*tier, key, 1000, &err) == BytesOf(int(key.node), 1000));
}

TEST_CASE("DirectoryTier Recover ignores a torn last journal line", "[directory_tier]") {
  TempTree dir;
  std::map<int, std::string> file_of;
  Populate(dir, 2, 1000, &file_of);
  // A crash in the middle of the last record's write: drop its newline.
  std::string journal;
  {
    std::ifstream in(dir.Abs("journal"));
    journal.assign(std::istreambuf_iterator<char>(in), {});
  }
  REQUIRE(journal.ends_with("file2\n"));
  dir.Write("journal", journal.substr(0, journal.size() - 1));

  auto tier = Open(dir, 1 << 20);
  auto keys = tier->Recover(AcceptAll);
  REQUIRE(keys.size() == 1);
  CHECK(keys[0] == ChunkKey{1, 0});
  CHECK(DataFiles(dir) == std::set<std::string>{file_of[1]});
}

TEST_CASE("DirectoryTier passes odd paths through the journal", "[directory_tier]") {
  TempTree dir;
  const std::vector<std::string> paths = {"a b/c  d ", "new\nline", "back\\slash\\",
                                          "\\n not a newline", " lead"};
  {
    auto tier = Open(dir, 1 << 20);
    tier->Recover(AcceptAll);
    for (size_t i = 0; i < paths.size(); ++i) {
      ChunkOrigin o{paths[i], 10, 1, 0, 10};
      Store(*tier, ChunkKey{NodeId(i), 0}, o, std::string(10, 'z'));
    }
  }
  auto tier = Open(dir, 1 << 20);
  std::set<std::string> seen;
  auto keys = tier->Recover([&](const ChunkOrigin& o) {
    seen.insert(o.path);
    return ChunkKey{NodeId(seen.size()), 0};
  });
  CHECK(keys.size() == paths.size());
  CHECK(seen == std::set<std::string>(paths.begin(), paths.end()));
}

TEST_CASE("OpenDirectoryTier with reset starts empty", "[directory_tier]") {
  TempTree dir;
  Populate(dir, 3, 100);
  auto tier = Open(dir, 1 << 20, /*reset=*/true);
  CHECK(DataFiles(dir).empty());
  CHECK(tier->Recover(AcceptAll).empty());
  CHECK(tier->used() == 0);
  CHECK(tier->chunks() == 0);
}

TEST_CASE("OpenDirectoryTier refuses a directory another tier holds", "[directory_tier]") {
  TempTree dir;
  auto first = Open(dir, 1 << 20);
  Status busy = OpenDirectoryTier("again", dir.root(), 1 << 20, false).status();
  CHECK(busy.code() == EBUSY);
  CHECK_THAT(busy.message(), Catch::Contains("in use"));
  CHECK_THAT(busy.message(), Catch::Contains(dir.root()));
  first.reset();
  CHECK(OpenDirectoryTier("again", dir.root(), 1 << 20, false).ok());
}

TEST_CASE("OpenDirectoryTier explains an unusable path", "[directory_tier]") {
  TempTree dir;
  dir.Write("file", "x");
  for (const std::string& path : {dir.Abs("missing"), dir.Abs("file"), dir.Abs("file/sub")}) {
    Status bad = OpenDirectoryTier("bad", path, 1 << 20, false).status();
    CHECK_THAT(bad.message(),
               Catch::Contains(path) && Catch::Contains("not an existing directory"));
    CHECK(bad.code() == (path == dir.Abs("missing") ? ENOENT : ENOTDIR));
  }
}

TEST_CASE("DirectoryTier given a relative path keeps working after a chdir (issue 11)",
          "[directory_tier]") {
  TempTree dir;
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(std::filesystem::path(dir.root()).parent_path());
  auto opened = OpenDirectoryTier("rel", std::filesystem::path(dir.root()).filename().string(),
                                  1 << 20, false);
  std::filesystem::current_path("/");  // as the daemon after daemonizing
  auto tier = RequireOk(std::move(opened));
  CHECK(tier->path() == dir.root());
  CHECK(tier->Recover(AcceptAll).empty());
  Store(*tier, ChunkKey{1, 0}, OriginOf(1, 100), BytesOf(1, 100));
  int err = 0;
  CHECK(ReadAll(*tier, ChunkKey{1, 0}, 100, &err) == BytesOf(1, 100));
  std::filesystem::current_path(cwd);
  CHECK(DataFiles(dir).size() == 1);
}

TEST_CASE("DirectoryTier data/ is the daemon's alone whatever the umask (issue 11)",
          "[directory_tier]") {
  TempTree dir;
  SECTION("created 0700 under umask 0") {
    const mode_t old = ::umask(0);
    auto tier = Open(dir, 1 << 20);
    ::umask(old);
    struct stat st;
    REQUIRE(::lstat(dir.Abs("data").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0700);
  }
  SECTION("an existing data/ open to others is emptied and closed") {
    Populate(dir, 2, 100).reset();
    REQUIRE(::chmod(dir.Abs("data").c_str(), 0777) == 0);
    auto tier = Open(dir, 1 << 20);
    struct stat st;
    REQUIRE(::lstat(dir.Abs("data").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0700);
    CHECK(tier->Recover(AcceptAll).empty());  // nothing of what others could have swapped
    CHECK(DataFiles(dir).empty());
  }
}

TEST_CASE("DirectoryTier keeps nothing from a tier of another SOURCE", "[directory_tier]") {
  TempTree dir;
  {
    auto tier = Open(dir, 1 << 20);
    std::vector<ChunkKey> kept;
    REQUIRE(tier->Recover("/pfs/a ino 11", AcceptAll, &kept) == 0);
    Store(*tier, ChunkKey{1, 0}, OriginOf(1, 100), BytesOf(1, 100));
  }
  {  // the same SOURCE again: reused
    auto tier = Open(dir, 1 << 20);
    std::vector<ChunkKey> kept;
    REQUIRE(tier->Recover("/pfs/a ino 11", AcceptAll, &kept) == 0);
    CHECK(kept == std::vector<ChunkKey>{ChunkKey{1, 0}});
  }
  // Same layout, another SOURCE (path, or the same path recreated): nothing
  // is reused, whatever the acceptor would take, and the copies are removed.
  auto tier = Open(dir, 1 << 20);
  std::vector<ChunkKey> kept;
  REQUIRE(tier->Recover("/pfs/a ino 12", AcceptAll, &kept) == 0);
  CHECK(kept.empty());
  CHECK(tier->chunks() == 0);
  CHECK(DataFiles(dir).empty());
}

TEST_CASE("DirectoryTier journal stays bounded under eviction churn", "[directory_tier]") {
  TempTree dir;
  auto tier = Open(dir, 1 << 20);
  REQUIRE(tier->Recover(AcceptAll).empty());
  // 20,000 publish + remove pairs over 8 live chunks: 40,000 records unless
  // the journal is compacted. The tier says when (maintenance_due); the
  // store's reclaimer then runs Maintain, off the publishers' threads.
  uint64_t due = 0;
  for (int i = 1; i <= 20000; ++i) {
    Store(*tier, ChunkKey{NodeId(i), 0}, OriginOf(i, 10), BytesOf(i, 10));
    if (i > 8) CHECK(tier->Remove(ChunkKey{NodeId(i - 8), 0}) == 10);
    tier->Release(i > 8 ? 10 : 0);
    if (tier->maintenance_due()) {
      due++;
      tier->Maintain();
      CHECK_FALSE(tier->maintenance_due());
    }
  }
  CHECK(due >= 4);
  const auto bytes = std::filesystem::file_size(dir.Abs("journal"));
  CHECK(bytes < 400 * 1024);  // ~4096 + 8 records of ~40 bytes at most; 40,000 would be ~1.4 MB
  tier.reset();               // its lock
  auto again = Open(dir, 1 << 20);
  auto kept = again->Recover(AcceptAll);
  std::sort(kept.begin(), kept.end(), [](ChunkKey a, ChunkKey b) { return a.node < b.node; });
  REQUIRE(kept.size() == 8);
  CHECK(kept.front().node == 19993);
  CHECK(kept.back().node == 20000);
  int err = 0;
  CHECK(ReadAll(*again, ChunkKey{20000, 0}, 10, &err) == BytesOf(20000, 10));
}

}  // namespace
}  // namespace tierfs
