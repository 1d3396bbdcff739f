// The saved namespace index (tiering/namespace/namespace_index.h): its
// checksum, the round trip, and the refusal of bad files (writable by
// others, damaged, truncated, foreign, an impossible tree, random damage)
// and of directories others can write. OpenNamespace over the index is
// tested in namespace_open_test.cc, both through a failing FileIo in
// namespace_index_faults_test.cc; their fixture is namespace_index_fixture.h.
#include "tiering/namespace/namespace_index.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "namespace_index_fixture.h"
#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/base/xxh64.h"
#include "tiering/namespace/namespace_open.h"

namespace tierfs {
namespace {

using testing::Dump;
using testing::Fixture;
using testing::TempTree;

// A refusal: its message matches, its errno is `code`.
template <class Matcher>
void CheckRefusal(const Status& refused, const Matcher& message, int code) {
  CHECK_THAT(refused.message(), message);
  CHECK(refused.code() == code);
}

TEST_CASE("Xxh64 matches the reference vectors", "[namespace_index]") {
  CHECK(Xxh64("", 0) == 0xEF46DB3751D8E999ULL);
  CHECK(Xxh64("abc", 3) == 0x44BC2CF5AD770999ULL);
  std::string long_input(100, 'a');  // through the 32-byte stripes and every tail
  CHECK(Xxh64(long_input.data(), 99) != Xxh64(long_input.data(), 100));
}

TEST_CASE("An index round trip equals the scan, every attribute of every node",
          "[namespace_index]") {
  Fixture f;
  auto scanned = f.Scan();
  REQUIRE(WriteIndex(*scanned, f.id, 1234, f.index).ok());
  IndexInfo info;
  auto loaded = RequireOk(LoadIndex(f.index, &f.id, &info));
  CHECK(Dump(*loaded) == Dump(*scanned));
  CHECK(loaded->arena() == scanned->arena());
  CHECK(loaded->fs_stats().f_blocks == scanned->fs_stats().f_blocks);
  CHECK(loaded->fs_stats().f_namemax == scanned->fs_stats().f_namemax);
  CHECK(loaded->mapped());  // our own file, 0600: mapped, not copied
  CHECK(info.created_ns == 1234);
  CHECK(info.source.path == f.id.path);
  CHECK(info.source.root_ino == f.id.root_ino);
  struct stat st;
  REQUIRE(::stat(f.index.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
}

TEST_CASE("An index others could have written is not trusted", "[namespace_index]") {
  Fixture f;
  f.Save();
  REQUIRE(::chmod(f.index.c_str(), 0620) == 0);
  CheckRefusal(f.Refusal(&f.id), Catch::Contains("writable by others (mode 620)"), EACCES);
  REQUIRE(::chmod(f.index.c_str(), 0602) == 0);
  CheckRefusal(f.Refusal(&f.id), Catch::Contains("writable by others"), EACCES);
  if (::geteuid() == 0) {  // another owner: only root can make one
    REQUIRE(::chmod(f.index.c_str(), 0600) == 0);
    REQUIRE(::chown(f.index.c_str(), 12345, 12345) == 0);
    CheckRefusal(f.Refusal(&f.id), Catch::Contains("belongs to uid 12345"), EACCES);
  }
}

TEST_CASE("A damaged, truncated or foreign index is refused with a clear message",
          "[namespace_index]") {
  Fixture f;
  f.Save();
  const std::string good = f.Bytes();
  REQUIRE(good.size() > 8192);

  SECTION("missing") {
    REQUIRE(::unlink(f.index.c_str()) == 0);
    CheckRefusal(f.Refusal(&f.id), Catch::Contains("No such file"), ENOENT);
  }
  SECTION("a byte of a node flipped") {
    std::string bad = good;
    bad[8192 + 100] ^= 1;
    f.Put(bad);
    CheckRefusal(f.Refusal(&f.id), Catch::Contains("corrupted (checksum)"), EUCLEAN);
  }
  SECTION("a byte of a name flipped") {
    std::string bad = good;
    bad[bad.size() - 3] ^= 0x20;
    f.Put(bad);
    CheckRefusal(f.Refusal(&f.id), Catch::Contains("corrupted (checksum)"), EUCLEAN);
  }
  SECTION("the header damaged") {
    std::string bad = good;
    bad[40] ^= 4;
    f.Put(bad);
    CheckRefusal(f.Refusal(&f.id), Catch::Contains("header is corrupted"), EUCLEAN);
  }
  SECTION("truncated") {
    f.Put(good.substr(0, good.size() - 1));
    CheckRefusal(f.Refusal(&f.id), Catch::Contains("truncated"), EUCLEAN);
    f.Put(good.substr(0, 100));
    CheckRefusal(f.Refusal(&f.id), Catch::Contains("truncated"), EUCLEAN);
    f.Put("");
    CheckRefusal(f.Refusal(&f.id), Catch::Contains("truncated"), EUCLEAN);
  }
  SECTION("not an index") {
    f.Put(std::string(10000, 'z'));
    CheckRefusal(f.Refusal(&f.id), Catch::Contains("not a tierfs namespace index"), EINVAL);
  }
  SECTION("another version") {
    std::string bad = good;
    bad[8] = static_cast<char>(kIndexVersion + 1);  // version follows the 8-byte magic
    f.Put(bad);
    CheckRefusal(f.Refusal(&f.id),
                 Catch::Contains(fmt::format("version {}; this tierfs reads version {}",
                                             kIndexVersion + 1, kIndexVersion)),
                 EINVAL);
  }
  SECTION("another SOURCE") {
    SourceIdentity other = f.id;
    other.path = "/somewhere/else";
    CheckRefusal(f.Refusal(&other), Catch::Contains("describes SOURCE '" + f.id.path + "'"),
                 ESTALE);
    other = f.id;
    other.root_ino++;
    CheckRefusal(f.Refusal(&other), Catch::Contains("is another directory now"), ESTALE);
  }
  SECTION("a symlink") {
    std::string link = f.index + ".link";
    REQUIRE(::symlink(f.index.c_str(), link.c_str()) == 0);
    CheckRefusal(LoadIndex(link, &f.id).status(),
                 Catch::Contains("Too many levels of symbolic links"), ELOOP);
    ::unlink(link.c_str());
  }
}

TEST_CASE("An index with valid checksums but an impossible tree is refused", "[namespace_index]") {
  Fixture f;
  auto ns = f.Scan();
  // Each mutation keeps the checksums right (WriteIndex computes them), as a
  // hostile user who rewrites the file would.
  using Mutation = std::function<void(std::vector<Node>&)>;
  std::vector<std::pair<std::string, Mutation>> cases = {
      {"name outside", [](std::vector<Node>& n) { n[3].name_off = 1u << 30; }},
      {"children outside", [](std::vector<Node>& n) { n[0].child_count = 1u << 30; }},
      {"parent loop", [](std::vector<Node>& n) { n[2].parent = 5; }},
      {"root not a dir", [](std::vector<Node>& n) { n[0].mode = S_IFREG | 0644; }},
      {"fifo", [](std::vector<Node>& n) { n.back().mode = S_IFIFO | 0644; }},
      {"unsorted", [](std::vector<Node>& n) { std::swap(n[1].name_off, n[2].name_off); }},
      {"file with children",
       [](std::vector<Node>& n) {
         for (auto& x : n) {
           if (S_ISREG(x.mode)) {
             x.first_child = 1;
             break;
           }
         }
       }},
      {"size total",
       [](std::vector<Node>& n) {
         for (auto& x : n) {
           if (S_ISREG(x.mode)) {
             x.size += 1;
             break;
           }
         }
       }},
  };
  for (auto& [what, mutate] : cases) {
    INFO(what);
    std::vector<Node> nodes(ns->nodes().begin(), ns->nodes().end());
    mutate(nodes);
    Namespace bad(nodes, ns->arena(), ns->totals(), ns->fs_stats(), nullptr);
    REQUIRE(WriteIndex(bad, f.id, RealtimeNanos(), f.index).ok());
    CheckRefusal(f.Refusal(&f.id), Catch::Contains("inconsistent"), EUCLEAN);
  }
}

TEST_CASE("Random damage to an index never crashes the loader", "[namespace_index]") {
  Fixture f;
  f.Save();
  const std::string good = f.Bytes();
  std::mt19937 rng(12);
  for (int i = 0; i < 300; ++i) {
    std::string bad = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    if (rng() % 5 == 0) bad.resize(rng() % bad.size());
    f.Put(bad);
    Result<std::unique_ptr<Namespace>> ns = LoadIndex(f.index, &f.id);
    if (bad != good) {
      CHECK_FALSE(ns.ok());
      CHECK_FALSE(ns.status().message().empty());
    }
  }
}

TEST_CASE("CheckPrivateDirectory refuses directories others can write", "[namespace_index]") {
  TempTree t;
  t.Mkdir("mine");
  CHECK(CheckPrivateDirectory(t.Abs("mine")).ok());
  REQUIRE(::chmod(t.Abs("mine").c_str(), 0777) == 0);
  CheckRefusal(CheckPrivateDirectory(t.Abs("mine")), Catch::Contains("writable by others"), EACCES);
  t.Symlink("mine", "link");
  CheckRefusal(CheckPrivateDirectory(t.Abs("link")), Catch::Contains("not a directory"), ENOTDIR);
  CheckRefusal(CheckPrivateDirectory(t.Abs("missing")),
               Catch::Equals("'" + t.Abs("missing") + "': No such file or directory"), ENOENT);
}

}  // namespace
}  // namespace tierfs
