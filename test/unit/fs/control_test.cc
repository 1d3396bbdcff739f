// ControlDir: the .tierfs/ directory and its per-lookup stats snapshots.
#include "fs/fuse/control.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>

namespace tierfs {
namespace {

constexpr uint64_t kDirIno = 1000;

// A ControlDir whose stats text changes with every snapshot taken, and whose
// length grows, so snapshots can be told apart by content and size.
struct Control {
  int produced = 0;
  ControlDir dir{
      kDirIno,
      123,
      456,
      {ControlFile{"stats", [this](uid_t) { return Text(++produced); }, nullptr, nullptr}}};

  static std::string Text(int n) {
    return fmt::format("{{\"snapshot\": {}, \"pad\": \"{}\"}}\n", n,
                       std::string(static_cast<size_t>(n), 'x'));
  }
  uint64_t LookupStats() {
    struct stat st;
    REQUIRE(dir.Lookup("stats", 0, &st) == 0);
    return st.st_ino;
  }
  // The whole of snapshot `ino`, read in one call.
  std::string ReadAll(uint64_t ino) {
    std::string_view out;
    std::shared_ptr<const std::string> hold;
    REQUIRE(dir.Read(ino, 0, 1 << 20, &out, &hold) == 0);
    return std::string(out);
  }
};

TEST_CASE("ControlDir gives each lookup of stats a new inode and snapshot", "[control]") {
  Control c;
  struct stat first, second;
  REQUIRE(c.dir.Lookup("stats", 0, &first) == 0);
  REQUIRE(c.dir.Lookup("stats", 0, &second) == 0);
  CHECK(c.produced == 2);
  CHECK(first.st_ino != second.st_ino);
  CHECK(c.dir.Owns(first.st_ino));
  CHECK(c.dir.Owns(second.st_ino));
  CHECK(S_ISREG(first.st_mode));
  CHECK((first.st_mode & 07777) == 0444);
  CHECK(first.st_uid == 123);
  CHECK(first.st_gid == 456);
  CHECK(first.st_size == static_cast<off_t>(Control::Text(1).size()));
  CHECK(second.st_size == static_cast<off_t>(Control::Text(2).size()));
  CHECK(c.ReadAll(first.st_ino) == Control::Text(1));
  CHECK(c.ReadAll(second.st_ino) == Control::Text(2));
  CHECK(c.dir.held_snapshots() == 2);
}

TEST_CASE("ControlDir GetAttr agrees with Lookup", "[control]") {
  Control c;
  struct stat looked, got;
  REQUIRE(c.dir.Lookup("stats", 0, &looked) == 0);
  REQUIRE(c.dir.GetAttr(looked.st_ino, &got) == 0);
  CHECK(got.st_ino == looked.st_ino);
  CHECK(got.st_mode == looked.st_mode);
  CHECK(got.st_size == looked.st_size);
  CHECK(got.st_uid == looked.st_uid);
  CHECK(got.st_blocks == (looked.st_size + 511) / 512);
  CHECK(c.produced == 1);  // GetAttr takes no new snapshot
  REQUIRE(c.dir.GetAttr(kDirIno, &got) == 0);
  CHECK(S_ISDIR(got.st_mode));
  CHECK(c.dir.GetAttr(looked.st_ino + 1, &got) == -ENOENT);
}

TEST_CASE("ControlDir Read returns exact slices of a snapshot", "[control]") {
  Control c;
  c.produced = 40;  // a longer text
  uint64_t ino = c.LookupStats();
  const std::string text = Control::Text(41);
  std::string_view out;
  std::shared_ptr<const std::string> hold;
  auto read = [&](uint64_t off, size_t size) {
    REQUIRE(c.dir.Read(ino, off, size, &out, &hold) == 0);
    return std::string(out);
  };
  CHECK(read(0, 5) == text.substr(0, 5));
  CHECK(read(7, 10) == text.substr(7, 10));
  CHECK(read(text.size() - 3, 100) == text.substr(text.size() - 3));  // straddles the end
  CHECK(read(0, text.size()) == text);
  CHECK(read(text.size(), 10).empty());  // at the end
  CHECK(read(text.size() + 100, 10).empty());
  CHECK(read(3, 0).empty());
  // *hold keeps the bytes alive even after the snapshot is forgotten.
  REQUIRE(c.dir.Read(ino, 2, 6, &out, &hold) == 0);
  c.dir.Forget(ino, 1);
  CHECK(std::string(out) == text.substr(2, 6));
  CHECK(hold.use_count() == 1);
}

TEST_CASE("ControlDir Forget frees a snapshot", "[control]") {
  Control c;
  uint64_t a = c.LookupStats(), b = c.LookupStats();
  CHECK(c.dir.held_snapshots() == 2);
  c.dir.Forget(a, 1);
  CHECK(c.dir.held_snapshots() == 1);
  std::string_view out;
  std::shared_ptr<const std::string> hold;
  CHECK(c.dir.Read(a, 0, 10, &out, &hold) == -EIO);
  struct stat st;
  CHECK(c.dir.GetAttr(a, &st) == -ENOENT);
  CHECK(c.ReadAll(b) == Control::Text(2));
  c.dir.Forget(a, 1);  // already gone: harmless
  c.dir.Forget(b, 5);  // more than it had
  CHECK(c.dir.held_snapshots() == 0);
  c.dir.Forget(kDirIno, 1);
  CHECK(c.dir.GetAttr(kDirIno, &st) == 0);
}

TEST_CASE("ControlDir caps the snapshots it keeps", "[control]") {
  Control c;
  const size_t n = ControlDir::kMaxSnapshots + 10;
  std::vector<uint64_t> inos;
  for (size_t i = 0; i < n; ++i) {
    inos.push_back(c.LookupStats());
    CHECK(c.dir.held_snapshots() == std::min(i + 1, ControlDir::kMaxSnapshots));
  }
  CHECK(c.dir.held_snapshots() == ControlDir::kMaxSnapshots);
  std::string_view out;
  std::shared_ptr<const std::string> hold;
  for (size_t i = 0; i < 10; ++i) CHECK(c.dir.Read(inos[i], 0, 10, &out, &hold) == -EIO);
  CHECK(c.ReadAll(inos[10]) == Control::Text(11));  // the oldest one kept
  CHECK(c.ReadAll(inos.back()) == Control::Text(static_cast<int>(n)));
}

TEST_CASE("ControlDir: others' lookups beyond the cap do not break an open control file",
          "[control]") {
  std::vector<std::string> written;
  ControlDir dir{kDirIno,
                 123,
                 456,
                 {ControlFile{"stats", [](uid_t) { return std::string("{}"); }, nullptr, nullptr},
                  ControlFile{"order", [](uid_t) { return std::string(); },
                              [&written](const HintWriter&, uint64_t, std::string_view data) {
                                written.emplace_back(data);
                                return static_cast<ssize_t>(data.size());
                              },
                              nullptr}}};
  struct stat st;
  REQUIRE(dir.Lookup("order", 0, &st) == 0);  // the owner opens .tierfs/order
  const uint64_t order = st.st_ino;
  for (size_t i = 0; i < ControlDir::kMaxSnapshots + 100; ++i) {  // anyone: cat .tierfs/stats
    REQUIRE(dir.Lookup("stats", 0, &st) == 0);
  }
  CHECK(dir.Write(order, HintWriter{1, {}}, 0, "f0\n") == 3);
  CHECK(written == std::vector<std::string>{"f0\n"});
  REQUIRE(dir.GetAttr(order, &st) == 0);
  CHECK((st.st_mode & S_IWUSR) != 0);
  CHECK(dir.Truncate(order) == 0);
  // Inodes never handed out stay unknown; a stats inode stays read-only.
  CHECK(dir.Write(kDirIno + 1000000, HintWriter{1, {}}, 0, "x") == -EIO);
  REQUIRE(dir.Lookup("stats", 0, &st) == 0);
  CHECK(dir.Write(st.st_ino, HintWriter{1, {}}, 0, "x") == -EACCES);
}

TEST_CASE("ControlDir knows only stats", "[control]") {
  Control c;
  struct stat st;
  CHECK(c.dir.Lookup("stat", 0, &st) == -ENOENT);
  CHECK(c.dir.Lookup("stats2", 0, &st) == -ENOENT);
  CHECK(c.dir.Lookup("", 0, &st) == -ENOENT);
  CHECK(c.dir.Lookup("..", 0, &st) == -ENOENT);
  CHECK(c.produced == 0);
  CHECK(c.dir.held_snapshots() == 0);
  CHECK(c.dir.Entries() == std::vector<std::string_view>{"stats"});
  std::string_view out;
  std::shared_ptr<const std::string> hold;
  CHECK(c.dir.Read(kDirIno, 0, 10, &out, &hold) == -EISDIR);
  CHECK(c.dir.Read(kDirIno + 1, 0, 10, &out, &hold) == -EIO);  // never looked up
}

TEST_CASE("ControlDir owns its inode and those above", "[control]") {
  Control c;
  CHECK(c.dir.dir_ino() == kDirIno);
  CHECK_FALSE(c.dir.Owns(0));
  CHECK_FALSE(c.dir.Owns(kDirIno - 1));
  CHECK(c.dir.Owns(kDirIno));
  uint64_t ino = c.LookupStats();
  CHECK(ino > kDirIno);
  CHECK(c.dir.Owns(ino));
}

TEST_CASE("ControlDir DirAttr is a read-only directory", "[control]") {
  Control c;
  struct stat st;
  st.st_size = 77;
  c.dir.DirAttr(&st);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 07777) == 0555);
  CHECK(st.st_ino == kDirIno);
  CHECK(st.st_nlink == 2);
  CHECK(st.st_uid == 123);
  CHECK(st.st_gid == 456);
  CHECK(st.st_size == 0);
}

TEST_CASE("A private control file is made and read for root and its owner only", "[control]") {
  int made = 0;
  auto write = [](const HintWriter&, uint64_t, std::string_view d) {
    return static_cast<ssize_t>(d.size());
  };
  ControlDir dir{
      kDirIno,
      123,
      456,
      {ControlFile{"changes", [&made](uid_t) { return std::to_string(++made); }, nullptr, nullptr,
                   true, false},
       ControlFile{"order", [](uid_t) { return std::string(); }, write, nullptr, false, true},
       ControlFile{"prefetch", [](uid_t) { return std::string("x"); }, write, nullptr}}};
  struct stat st;
  REQUIRE(dir.Lookup("changes", 777, &st) == 0);  // another user: not even made
  CHECK(made == 0);
  CHECK(st.st_size == 0);
  CHECK((st.st_mode & 07777) == 0400);
  CHECK_FALSE(dir.MayRead(st.st_ino, 777));
  REQUIRE(dir.Lookup("changes", ControlDir::kListing, &st) == 0);  // ls -l .tierfs
  CHECK(made == 0);
  REQUIRE(dir.Lookup("changes", 123, &st) == 0);
  CHECK(made == 1);
  CHECK(dir.MayRead(st.st_ino, 123));
  CHECK(dir.MayRead(st.st_ino, 0));
  CHECK_FALSE(dir.MayRead(st.st_ino, 777));  // an owner's snapshot, read by another
  REQUIRE(dir.Lookup("changes", 0, &st) == 0);
  CHECK(made == 2);
  CHECK(dir.Write(st.st_ino, HintWriter{1, {}}, 0, "x") == -EACCES);  // read-only, even for root

  REQUIRE(dir.Lookup("order", 777, &st) == 0);  // public_write: anyone may write it
  CHECK((st.st_mode & 07777) == 0666);
  CHECK(dir.MayWrite(st.st_ino, 777));
  CHECK(dir.MayRead(st.st_ino, 777));
  REQUIRE(dir.Lookup("prefetch", 777, &st) == 0);  // the others stay the owner's
  CHECK((st.st_mode & 07777) == 0644);
  CHECK_FALSE(dir.MayWrite(st.st_ino, 777));
  CHECK(dir.MayWrite(st.st_ino, 123));
  CHECK(dir.MayWrite(st.st_ino, 0));
}

TEST_CASE("A control file's content is made for the uid that looked it up", "[control]") {
  std::vector<uid_t> readers;
  ControlDir dir{kDirIno,
                 123,
                 456,
                 {ControlFile{"stats",
                              [&readers](uid_t reader) {
                                readers.push_back(reader);
                                return std::to_string(reader);
                              },
                              nullptr, nullptr}}};
  struct stat a, b, listed;
  REQUIRE(dir.Lookup("stats", 1000, &a) == 0);
  REQUIRE(dir.Lookup("stats", 0, &b) == 0);
  REQUIRE(dir.Lookup("stats", ControlDir::kListing, &listed) == 0);
  CHECK(readers == std::vector<uid_t>{1000, 0, ControlDir::kListing});
  std::string_view out;
  std::shared_ptr<const std::string> hold;
  REQUIRE(dir.Read(a.st_ino, 0, 100, &out, &hold) == 0);
  CHECK(out == "1000");
  REQUIRE(dir.Read(b.st_ino, 0, 100, &out, &hold) == 0);
  CHECK(out == "0");
}

}  // namespace
}  // namespace tierfs
