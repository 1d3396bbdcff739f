// CheckFreshness (tiering/namespace/namespace_freshness.h): a snapshot
// compared with SOURCE now. Unchanged: all zero; a file rewritten with its
// size, a file added to a directory and one removed are told apart; an I/O
// error is counted, not fatal. IdentityChange is its pure core (and the
// open-file cache's identity check).
#include "tiering/namespace/namespace_freshness.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "fault_backend.h"
#include "namespace_index_fixture.h"
#include "require_ok.h"
#include "tiering/namespace/file_identity.h"

namespace tierfs {
namespace {

using testing::FaultBackend;
using testing::Fixture;
using testing::Op;

Node FileNode() {
  Node n;
  n.mode = S_IFREG | 0644;
  n.size = 10;
  n.mtime_ns = 5'000'000'001;
  n.ctime_ns = 6'000'000'002;
  n.ino = 42;
  return n;
}

struct stat StatOf(const Node& n) {
  struct stat st {};
  st.st_mode = n.mode;
  st.st_size = static_cast<off_t>(n.size);
  st.st_ino = n.ino;
  st.st_mtim = {n.mtime_ns / 1'000'000'000, n.mtime_ns % 1'000'000'000};
  st.st_ctim = {n.ctime_ns / 1'000'000'000, n.ctime_ns % 1'000'000'000};
  return st;
}

TEST_CASE("IdentityChange compares type, inode, size, mtime and ctime", "[freshness]") {
  const Node n = FileNode();
  struct stat st = StatOf(n);
  CHECK(IdentityChange(n, st) == nullptr);
  st.st_ctim.tv_nsec += 1;  // a same-size rewrite, a chmod: ctime moves
  CHECK(IdentityChange(n, st) != nullptr);
  st = StatOf(n);
  st.st_size += 1;
  CHECK(IdentityChange(n, st) != nullptr);
  st = StatOf(n);
  st.st_ino = 43;
  CHECK(IdentityChange(n, st) != nullptr);
  Node unstable = n;
  unstable.ino = 0;  // SOURCE without stable inodes: the inode is not compared
  CHECK(IdentityChange(unstable, st) == nullptr);
  st = StatOf(n);
  st.st_mode = S_IFDIR | 0755;
  CHECK(IdentityChange(n, st) != nullptr);
  Node dir = n;
  dir.mode = S_IFDIR | 0755;
  st = StatOf(dir);
  st.st_size = 4096;  // a directory's size and inode are not its identity
  st.st_ino = 7;
  CHECK(IdentityChange(dir, st) == nullptr);
  st.st_mtim.tv_sec += 1;
  CHECK(IdentityChange(dir, st) != nullptr);
}

TEST_CASE("FileIdentity: two records of a version match in all four, inode 0 included",
          "[freshness]") {
  const Node n = FileNode();
  const FileIdentity snapshot = FileIdentity::Of(n);
  CHECK(snapshot == FileIdentity::Of(StatOf(n)));
  FileIdentity copy = snapshot;  // a tier copy's or a peer's record of it
  copy.ctime_ns += 1;
  CHECK(copy != snapshot);
  copy = snapshot;
  copy.ino = 0;  // a record from a snapshot without stable inodes is another record
  CHECK(copy != snapshot);
  CHECK(copy.ChangeIn(snapshot) == nullptr);  // but a file found on SOURCE is not compared by it
  CHECK(snapshot.ChangeIn(copy) != nullptr);
}

TEST_CASE("CheckFreshness of an unchanged SOURCE finds nothing", "[freshness]") {
  Fixture f;
  auto ns = f.Scan();
  const FreshnessReport r = CheckFreshness(f.backend.get(), *ns, 4);
  CHECK(r.checked_files == ns->file_count());
  CHECK(r.checked_dirs == ns->dir_count());
  CHECK(r.changed_files + r.changed_dirs + r.missing + r.errors == 0);
  CHECK(r.samples.empty());
  CHECK(FreshnessJson(r).find("\"changed_files\":0,\"changed_dirs\":0,\"missing\":0,"
                              "\"errors\":0") != std::string::npos);
}

TEST_CASE("CheckFreshness tells rewritten, added and removed entries apart", "[freshness]") {
  Fixture f;
  auto ns = f.Scan();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  f.tree->Write("class1/img002.jpg", std::string(20, 'y'));          // same size, new bytes
  f.tree->Write("class2/new.jpg", "new");                            // class2 changes
  REQUIRE(::unlink(f.tree->Abs("class3/img004.jpg").c_str()) == 0);  // class3 changes
  const FreshnessReport r = CheckFreshness(f.backend.get(), *ns, 0, 2);
  CHECK(r.changed_files == 1);
  CHECK(r.changed_dirs == 2);
  CHECK(r.missing == 1);
  CHECK(r.errors == 0);
  CHECK(r.samples.size() == 2);  // at most max_samples
  const std::string json = FreshnessJson(r);
  CHECK(json.find("\"changed_files\":1,\"changed_dirs\":2,\"missing\":1,\"errors\":0") !=
        std::string::npos);
  CHECK(json.back() == '\n');
}

TEST_CASE("CheckFreshness counts an I/O error and goes on", "[freshness]") {
  Fixture f;
  auto ns = f.Scan();
  FaultBackend faulty(f.backend);
  faulty.Fail(Op::kStat, "class4/img007.jpg", EIO);
  faulty.Fail(Op::kStat, "class0/nested", EACCES);
  const FreshnessReport r = CheckFreshness(&faulty, *ns, 3);
  CHECK(r.errors == 2);
  CHECK(r.changed_files + r.changed_dirs + r.missing == 0);
}

}  // namespace
}  // namespace tierfs
