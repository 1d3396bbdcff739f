// Namespace and ScanNamespace, over a real directory tree under /tmp.
#include "tiering/namespace/namespace.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <map>

#include "fault_backend.h"
#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/io/counting_backend.h"

namespace tierfs {
namespace {

using testing::FaultBackend;
using testing::Op;
using testing::TempTree;

constexpr int kDeepChain = 50;
constexpr int kWideEntries = 5000;
// Starts with a byte above 0x7f: byte order puts it after every ASCII name.
constexpr const char* kUtf8Name = "\xc3\xa9t\xc3\xa9 w\xc3\xb6rld.txt";  // "été wörld.txt"

std::string DeepPath(int depth) {
  std::string path = "deep";
  for (int i = 0; i < depth; ++i) path += fmt::format("/d{}", i);
  return path;
}

// The tree every test scans, built once (5000 files take a while to create)
// and removed at exit.
const TempTree& Source() {
  static const std::unique_ptr<TempTree> tree = [] {
    auto t = std::make_unique<TempTree>();
    t->Mkdir("a");
    t->Write("a/file one.txt", "one");
    t->Write("a/B", "capital");
    t->Write("a/_", "underscore");
    t->Write("a/10", "ten");
    t->Write("a/9", "nine");
    t->Write(std::string("a/") + kUtf8Name, "utf-8");
    t->Mkdir("a/sub");
    t->Write("a/sub/inner", std::string(10000, 'x'));
    t->Mkdir("a/sub/subsub");
    t->Write("a/sub/subsub/leaf", "leaf");
    t->Mkdir("a/sibling");
    t->Write("a/sibling/kept", "kept");
    t->Symlink("sub/inner", "a/link_rel");
    t->Symlink("/etc/passwd", "link_abs");
    t->Symlink("does/not/exist", "dangling");
    t->Mkfifo("pipe");
    t->Mkdir("empty");
    t->Write("top", "top level file");
    t->Mkdir("deep");
    for (int i = 0; i < kDeepChain; ++i) t->Mkdir(DeepPath(i + 1));
    t->Write(DeepPath(kDeepChain) + "/bottom", "bottom");
    t->Mkdir("wide");
    for (int i = 0; i < kWideEntries; ++i) t->Write(fmt::format("wide/f{:05}", i), "");
    return t;
  }();
  return *tree;
}

// Directories: root, a, a/sub, a/sub/subsub, a/sibling, empty, deep (+ chain), wide.
constexpr uint64_t kDirs = 8 + kDeepChain;
// Files: 6 in a, inner, leaf, kept, top, bottom, wide's.
constexpr uint64_t kFiles = 11 + kWideEntries;
constexpr uint64_t kSymlinks = 3;

std::shared_ptr<Backend> Posix() { return RequireOk(NewPosixBackend(Source().root())); }

std::unique_ptr<Namespace> Scan(Backend* backend, unsigned threads = 16) {
  return RequireOk(ScanNamespace(backend, ScanOptions{threads}));
}

NodeId MustResolve(const Namespace& ns, const std::string& path) {
  auto id = ns.Resolve(path);
  INFO(path);
  REQUIRE(id.has_value());
  return *id;
}

// Everything the snapshot says about every node, except atime: listing a
// directory may update its atime, so two scans can differ there.
std::string Dump(const Namespace& ns) {
  std::string out;
  for (NodeId id = 0; id < ns.size(); ++id) {
    const Node& n = ns.node(id);
    out += fmt::format("{} '{}' p={} m={:o} s={} b={} t={},{} u={} g={} l={} c={}+{}", id,
                       ns.name(id), n.parent, n.mode, n.size, n.blocks, n.mtime_ns, n.ctime_ns,
                       n.uid, n.gid, n.nlink, n.first_child, n.child_count);
    if (S_ISLNK(n.mode)) out += fmt::format(" -> '{}'", ns.link_target(id));
    out += '\n';
  }
  return out;
}

TEST_CASE("ScanNamespace counts what it kept and skipped", "[namespace]") {
  CountingBackend backend(Posix());
  auto ns = Scan(&backend);
  CHECK(ns->dir_count() == kDirs);
  CHECK(ns->file_count() == kFiles);
  CHECK(ns->symlink_count() == kSymlinks);
  CHECK(ns->skipped_count() == 1);  // the FIFO
  CHECK(ns->size() == kDirs + kFiles + kSymlinks);
  CHECK_FALSE(ns->Resolve("pipe").has_value());
  uint64_t bytes = 3 + 7 + 10 + 3 + 4 + 5 + 10000 + 4 + 4 + 14 + 6;
  CHECK(ns->total_file_bytes() == bytes);
  CHECK(ns->memory_bytes() >= ns->size() * sizeof(Node));
}

TEST_CASE("Namespace attributes equal lstat of SOURCE", "[namespace]") {
  CountingBackend backend(Posix());
  auto ns = Scan(&backend);
  for (NodeId id = 0; id < ns->size(); ++id) {
    const Node& n = ns->node(id);
    std::string path = ns->Path(id);
    INFO(path);
    struct stat st = Source().Lstat(path);
    CHECK(n.mode == st.st_mode);
    CHECK(n.uid == st.st_uid);
    CHECK(n.gid == st.st_gid);
    CHECK(n.nlink == st.st_nlink);
    CHECK(n.mtime_ns == st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
    CHECK(n.ctime_ns == st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec);
    if (!S_ISDIR(n.mode)) {
      CHECK(n.size == static_cast<uint64_t>(st.st_size));
      CHECK(n.blocks == static_cast<uint64_t>(st.st_blocks));
    }
    struct stat filled;
    ns->Fill(id, 100, &filled);
    CHECK(filled.st_ino == id + 100);
    CHECK(filled.st_mode == st.st_mode);
    CHECK(filled.st_mtim.tv_sec == st.st_mtim.tv_sec);
    CHECK(filled.st_mtim.tv_nsec == st.st_mtim.tv_nsec);
    CHECK(filled.st_size == static_cast<off_t>(n.size));
  }
}

TEST_CASE("Namespace children are contiguous and sorted by bytes", "[namespace]") {
  CountingBackend backend(Posix());
  auto ns = Scan(&backend);
  for (NodeId id = 0; id < ns->size(); ++id) {
    if (id != kRootNode) CHECK(ns->node(id).parent < id);  // breadth-first
    if (!S_ISDIR(ns->node(id).mode)) continue;
    auto [begin, end] = ns->Children(id);
    CHECK(end - begin == ns->node(id).child_count);
    for (NodeId c = begin; c < end; ++c) {
      CHECK(ns->node(c).parent == id);
      if (c > begin) CHECK(ns->name(c - 1) < ns->name(c));
    }
  }
  auto [begin, end] = ns->Children(MustResolve(*ns, "a"));
  std::vector<std::string_view> names;
  for (NodeId c = begin; c < end; ++c) names.push_back(ns->name(c));
  std::vector<std::string_view> expected = {"10",       "9",       "B",   "_",      "file one.txt",
                                            "link_rel", "sibling", "sub", kUtf8Name};
  CHECK(names == expected);
  CHECK(ns->Children(MustResolve(*ns, "top")) == std::pair<NodeId, NodeId>(0, 0));
}

TEST_CASE("Namespace Lookup finds children by name", "[namespace]") {
  CountingBackend backend(Posix());
  auto ns = Scan(&backend);
  NodeId a = MustResolve(*ns, "a");
  auto one = ns->Lookup(a, "file one.txt");
  REQUIRE(one.has_value());
  CHECK(ns->name(*one) == "file one.txt");
  CHECK(ns->node(*one).size == 3);
  auto utf8 = ns->Lookup(a, kUtf8Name);
  REQUIRE(utf8.has_value());
  CHECK(ns->name(*utf8) == kUtf8Name);
  CHECK_FALSE(ns->Lookup(a, "file").has_value());
  CHECK_FALSE(ns->Lookup(a, "file one.txt2").has_value());
  CHECK_FALSE(ns->Lookup(a, "").has_value());
  CHECK_FALSE(ns->Lookup(kRootNode, "sub").has_value());  // only a's child
  CHECK_FALSE(ns->Lookup(*one, "x").has_value());         // not a directory
  NodeId empty = MustResolve(*ns, "empty");
  CHECK(S_ISDIR(ns->node(empty).mode));
  CHECK(ns->node(empty).child_count == 0);
  CHECK_FALSE(ns->Lookup(empty, "anything").has_value());
}

TEST_CASE("Namespace Path and Resolve round trip for every node", "[namespace]") {
  CountingBackend backend(Posix());
  auto ns = Scan(&backend);
  CHECK(ns->Path(kRootNode).empty());
  for (NodeId id = 0; id < ns->size(); ++id) {
    std::string path = ns->Path(id);
    INFO(path);
    auto back = ns->Resolve(path);
    REQUIRE(back.has_value());
    CHECK(*back == id);
  }
}

TEST_CASE("Namespace Resolve rejects '..' and tolerates '.' and '//'", "[namespace]") {
  CountingBackend backend(Posix());
  auto ns = Scan(&backend);
  NodeId inner = MustResolve(*ns, "a/sub/inner");
  CHECK(ns->Resolve("a//sub/./inner") == inner);
  CHECK(ns->Resolve("./a/sub/inner/") == inner);
  CHECK(ns->Resolve("") == kRootNode);
  CHECK(ns->Resolve(".") == kRootNode);
  CHECK_FALSE(ns->Resolve("..").has_value());
  CHECK_FALSE(ns->Resolve("a/..").has_value());
  CHECK_FALSE(ns->Resolve("a/../a").has_value());
  CHECK_FALSE(ns->Resolve("a/sub/../../top").has_value());
  CHECK_FALSE(ns->Resolve("a/missing").has_value());
  CHECK_FALSE(ns->Resolve("top/below_a_file").has_value());
  CHECK_FALSE(ns->Resolve("a/link_rel/x").has_value());  // symlinks are not followed
}

TEST_CASE("Namespace keeps symlink targets verbatim", "[namespace]") {
  CountingBackend backend(Posix());
  auto ns = Scan(&backend);
  NodeId rel = MustResolve(*ns, "a/link_rel");
  NodeId abs = MustResolve(*ns, "link_abs");
  NodeId dangling = MustResolve(*ns, "dangling");
  CHECK(S_ISLNK(ns->node(rel).mode));
  CHECK(ns->link_target(rel) == "sub/inner");
  CHECK(ns->link_target(abs) == "/etc/passwd");
  CHECK(ns->link_target(dangling) == "does/not/exist");
  CHECK(ns->node(abs).size == std::string("/etc/passwd").size());
}

TEST_CASE("Namespace holds a chain of 50 directories", "[namespace]") {
  CountingBackend backend(Posix());
  auto ns = Scan(&backend);
  std::string path = DeepPath(kDeepChain) + "/bottom";
  NodeId bottom = MustResolve(*ns, path);
  CHECK(ns->Path(bottom) == path);
  CHECK(ns->node(bottom).size == 6);
  int depth = 0;
  for (NodeId at = bottom; at != kRootNode; at = ns->node(at).parent) ++depth;
  CHECK(depth == kDeepChain + 2);  // deep, d0..d49, bottom
}

TEST_CASE("Namespace holds a directory of 5000 entries", "[namespace]") {
  CountingBackend backend(Posix());
  auto ns = Scan(&backend);
  NodeId wide = MustResolve(*ns, "wide");
  CHECK(ns->node(wide).child_count == kWideEntries);
  for (int i = 0; i < kWideEntries; ++i) {
    std::string name = fmt::format("f{:05}", i);
    auto id = ns->Lookup(wide, name);
    REQUIRE(id.has_value());
    CHECK(*id == ns->node(wide).first_child + static_cast<NodeId>(i));
  }
}

TEST_CASE("ScanNamespace lists each directory exactly once", "[namespace]") {
  auto faults = std::make_shared<FaultBackend>(Posix());
  CountingBackend backend(faults);
  auto ns = Scan(&backend);
  const SourceCounters& c = backend.counters();
  CHECK(c.lists == kDirs);
  CHECK(c.readlinks == kSymlinks);
  // The root, then every entry once (the skipped FIFO too): an lstat is a
  // metadata operation on a PFS, and CountingBackend counts each.
  const uint64_t entries = ns->size() - 1 + 1;
  CHECK(c.stats == 1 + entries);
  CHECK(c.statfs == 1);
  CHECK(c.opens == 0);
  CHECK(c.reads == 0);
  CHECK(c.errors == 0);
  CHECK(c.meta_ops() == kDirs + kSymlinks + 2 + entries);
  for (NodeId id = 0; id < ns->size(); ++id) {
    if (!S_ISDIR(ns->node(id).mode)) continue;
    INFO(ns->Path(id));
    CHECK(faults->calls(Op::kList, ns->Path(id)) == 1);
  }
}

TEST_CASE("ScanNamespace keeps an unlistable subdirectory empty", "[namespace]") {
  auto faults = std::make_shared<FaultBackend>(Posix());
  faults->Fail(Op::kList, "a/sub", EACCES);
  CountingBackend backend(faults);
  auto ns = Scan(&backend);
  NodeId sub = MustResolve(*ns, "a/sub");
  CHECK(S_ISDIR(ns->node(sub).mode));
  CHECK(ns->node(sub).child_count == 0);
  CHECK_FALSE(ns->Resolve("a/sub/inner").has_value());
  CHECK(ns->skipped_count() == 2);  // the FIFO and a/sub
  CHECK(faults->calls(Op::kList, "a/sub/subsub") == 0);
  // The rest is scanned.
  CHECK(ns->Resolve("a/sibling/kept").has_value());
  CHECK(ns->Resolve(DeepPath(kDeepChain) + "/bottom").has_value());
  CHECK(ns->dir_count() == kDirs - 1);  // a/sub/subsub is not seen
  CHECK(ns->file_count() == kFiles - 2);
  CHECK(backend.counters().errors == 1);
}

TEST_CASE("ScanNamespace refuses a tree whose names overflow the arena (issue 11)", "[namespace]") {
  TempTree tree;
  tree.Write(std::string(200, 'a'), "x");
  tree.Write(std::string(200, 'b'), "y");
  auto backend = RequireOk(NewPosixBackend(tree.root()));
  ScanOptions options;
  options.max_arena_bytes = 399;  // one byte short of the two names
  Status too_large = ScanNamespace(backend.get(), options).status();
  CHECK(too_large.code() == EOVERFLOW);
  CHECK_THAT(too_large.message(),
             Catch::Contains("too large for one mount") && Catch::Contains("400 bytes"));
  options.max_arena_bytes = 400;
  auto ns = RequireOk(ScanNamespace(backend.get(), options));
  CHECK(ns->name(*ns->Resolve(std::string(200, 'b'))) == std::string(200, 'b'));
}

TEST_CASE("ScanNamespace fails with a message when the root fails", "[namespace]") {
  auto faults = std::make_shared<FaultBackend>(Posix());
  SECTION("root stat fails") {
    faults->Fail(Op::kStat, "", EIO);
    Status failed = ScanNamespace(faults.get(), ScanOptions{}).status();
    CHECK(failed.message() == "cannot scan SOURCE: Input/output error");
    CHECK(failed.code() == EIO);
  }
  SECTION("root listing fails") {
    faults->Fail(Op::kList, "", EACCES);
    Status failed = ScanNamespace(faults.get(), ScanOptions{}).status();
    CHECK(failed.message() == "cannot list SOURCE: Permission denied");
    CHECK(failed.code() == EACCES);
  }
  SECTION("a failing statfs is not fatal") {
    faults->FailAll(Op::kStatfs, EIO);
    auto ns = Scan(faults.get());
    CHECK(ns->fs_stats().f_blocks == 0);
    CHECK(ns->dir_count() == kDirs);
  }
}

TEST_CASE("NewPosixBackend rejects a root that is not a directory", "[namespace]") {
  Status missing = NewPosixBackend(Source().Abs("missing")).status();
  CHECK(missing.code() == ENOENT);
  CHECK(missing.message() == "'" + Source().Abs("missing") + "': No such file or directory");
  CHECK(NewPosixBackend(Source().Abs("top")).status().code() == ENOTDIR);
}

TEST_CASE("ScanNamespace gives the same snapshot with 1 and 16 threads", "[namespace]") {
  CountingBackend one_backend(Posix()), many_backend(Posix());
  auto one = Scan(&one_backend, 1);
  auto many = Scan(&many_backend, 16);
  CHECK(one_backend.counters().lists == many_backend.counters().lists);
  REQUIRE(one->size() == many->size());
  std::string a = Dump(*one), b = Dump(*many);
  CHECK(a == b);
  CHECK(a.size() > 1000);
}

}  // namespace
}  // namespace tierfs
