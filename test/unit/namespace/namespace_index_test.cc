// The saved namespace index (tiering/namespace/namespace_index.h) and OpenNamespace
// (tiering/namespace/namespace_open.h): round trip, refusal of bad files, validation.
#include "tiering/namespace/namespace_index.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <thread>

#include "fault_backend.h"
#include "fault_file_io.h"
#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/base/xxh64.h"
#include "tiering/io/counting_backend.h"
#include "tiering/namespace/namespace_open.h"

namespace tierfs {
namespace {

using testing::FaultBackend;
using testing::TempTree;

// Every attribute of every node, atime included, and the totals.
std::string Dump(const Namespace& ns, bool atime = true) {
  std::string out =
      fmt::format("files={} dirs={} links={} bytes={} skipped={}\n", ns.file_count(),
                  ns.dir_count(), ns.symlink_count(), ns.total_file_bytes(), ns.skipped_count());
  for (NodeId id = 0; id < ns.size(); ++id) {
    const Node& n = ns.node(id);
    out += fmt::format("{} '{}' p={} m={:o} s={} b={} t={},{},{} u={} g={} l={} c={}+{}", id,
                       ns.name(id), n.parent, n.mode, n.size, n.blocks, atime ? n.atime_ns : 0,
                       n.mtime_ns, n.ctime_ns, n.uid, n.gid, n.nlink, n.first_child, n.child_count);
    if (S_ISLNK(n.mode)) out += fmt::format(" -> '{}'", ns.link_target(id));
    out += '\n';
  }
  return out;
}

// Like Dump, by path and without tree positions or directory times (which a
// change moves), so a snapshot after a change compares with a fresh scan.
std::string Listing(const Namespace& ns) {
  std::string out;
  for (NodeId id = 0; id < ns.size(); ++id) {
    const Node& n = ns.node(id);
    out += fmt::format("'{}' m={:o} s={}", ns.Path(id), n.mode, S_ISDIR(n.mode) ? 0 : n.size);
    if (!S_ISDIR(n.mode)) out += fmt::format(" t={}", n.mtime_ns);
    if (S_ISLNK(n.mode)) out += fmt::format(" -> '{}'", ns.link_target(id));
    out += '\n';
  }
  return out;
}

// A small dataset: class directories of files, a symlink, an empty directory.
// Waits for the clock to move on: the tests open indexes with no racy margin.
std::unique_ptr<TempTree> Dataset() {
  auto t = std::make_unique<TempTree>();
  for (int c = 0; c < 5; ++c) {
    t->Mkdir(fmt::format("class{}", c));
    for (int f = 0; f < 20; ++f) {
      t->Write(fmt::format("class{}/img{:03}.jpg", c, f), std::string(f * 10, 'x'));
    }
  }
  t->Mkdir("class0/nested");
  t->Write("class0/nested/deep.txt", "deep");
  t->Symlink("class1/img001.jpg", "alias");
  t->Mkdir("empty");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return t;
}

// What OpenNamespace says it did.
void Expect(const OpenReport& r, bool from_index, bool scanned, bool written) {
  CHECK(r.from_index == from_index);
  CHECK(r.scanned == scanned);
  CHECK(r.written == written);
}

// A refusal: its message matches, its errno is `code`.
template <class Matcher>
void CheckRefusal(const Status& refused, const Matcher& message, int code) {
  CHECK_THAT(refused.message(), message);
  CHECK(refused.code() == code);
}

struct Fixture {
  std::unique_ptr<TempTree> tree = Dataset();
  std::shared_ptr<Backend> backend;
  SourceIdentity id;
  std::string index;
  std::shared_ptr<FileIo> io_for_open;  // OpenQuietly's; null: the local file system

  Fixture() {
    backend = RequireOk(NewPosixBackend(tree->root()));
    struct stat st = tree->Lstat("");
    id = {tree->root(), st.st_dev, st.st_ino};
    index = tree->root() + ".index";
  }
  ~Fixture() {
    ::unlink(index.c_str());
    ::unlink((index + ".lock").c_str());
  }
  std::unique_ptr<Namespace> Scan() { return RequireOk(ScanNamespace(backend.get(), {4})); }
  void Save() { REQUIRE(WriteIndex(*Scan(), id, RealtimeNanos(), index).ok()); }
  // Why LoadIndex refuses the index.
  Status Refusal(const SourceIdentity* expected) {
    Result<std::unique_ptr<Namespace>> ns = LoadIndex(index, expected);
    CHECK_FALSE(ns.ok());
    return ns.status();
  }
  std::string Bytes() {
    std::ifstream in(index, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void Put(const std::string& bytes) {
    std::ofstream(index, std::ios::binary | std::ios::trunc) << bytes;
  }
  // No Catch2 assertion in here: threads call it (Catch2's are not thread-safe).
  Result<std::unique_ptr<Namespace>> OpenQuietly(IndexCheck check, OpenReport* report,
                                                 Backend* via) {
    OpenOptions o;
    o.index = index;
    o.check = check;
    o.scan_threads = 4;
    o.wait_s = 20;
    o.racy_margin_ns = 0;
    o.io = io_for_open;
    return OpenNamespace(via ? via : backend.get(), id, o, report);
  }
  std::unique_ptr<Namespace> Open(IndexCheck check, OpenReport* report, Backend* via = nullptr) {
    return RequireOk(OpenQuietly(check, report, via));
  }
};

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

TEST_CASE("A refused index makes the mount scan and write a good one", "[namespace_index]") {
  Fixture f;
  f.Put("garbage");
  OpenReport report;
  auto ns = f.Open(IndexCheck::kDirs, &report);
  Expect(report, false, true, true);
  REQUIRE(report.notes.size() == 1);
  CHECK_THAT(report.notes[0], Catch::Contains("refused") && Catch::Contains("scanning SOURCE"));
  CHECK(report.load_error.code() == EUCLEAN);  // shorter than a header
  CHECK_THAT(report.how, Catch::StartsWith("scanned, index written"));
  CHECK(Dump(*ns, false) == Dump(*f.Scan(), false));
  CHECK(LoadIndex(f.index, &f.id).ok());
}

TEST_CASE("A valid index mounts with one stat per directory and no listing", "[namespace_index]") {
  Fixture f;
  f.Save();
  CountingBackend counting(f.backend);
  OpenReport report;
  auto ns = f.Open(IndexCheck::kDirs, &report, &counting);
  Expect(report, true, false, false);
  CHECK(ns->mapped());
  CHECK(counting.counters().stats == ns->dir_count());
  CHECK(counting.counters().lists == 0);
  CHECK(counting.counters().meta_ops() == ns->dir_count());

  CountingBackend untouched(f.backend);
  OpenReport none;
  f.Open(IndexCheck::kNone, &none, &untouched);
  CHECK(untouched.counters().meta_ops() == 0);
}

TEST_CASE("A directory with a file added, removed or renamed is listed again",
          "[namespace_index]") {
  Fixture f;
  f.Save();
  std::string change =
      GENERATE(as<std::string>{}, "added", "removed", "renamed", "nested", "dir removed");
  INFO(change);
  uint64_t expect_listed = 1;
  if (change == "added") f.tree->Write("class2/new.jpg", "new");
  if (change == "removed") f.tree->Remove("class3/img004.jpg");
  if (change == "renamed") {
    REQUIRE(::rename(f.tree->Abs("class4/img000.jpg").c_str(),
                     f.tree->Abs("class4/zzz.jpg").c_str()) == 0);
  }
  if (change == "nested") {
    f.tree->Mkdir("class1/sub");  // class1 changes; the new sub is listed too
    f.tree->Write("class1/sub/x", "x");
    expect_listed = 2;
  }
  if (change == "dir removed") {
    f.tree->Remove("class0/nested/deep.txt");
    REQUIRE(::rmdir(f.tree->Abs("class0/nested").c_str()) == 0);
  }
  CountingBackend counting(f.backend);
  OpenReport report;
  auto ns = f.Open(IndexCheck::kDirs, &report, &counting);
  Expect(report, true, true, true);
  CHECK(counting.counters().lists == expect_listed);
  CHECK(Listing(*ns) == Listing(*f.Scan()));
  if (change == "added") CHECK(ns->Resolve("class2/new.jpg"));
  if (change == "removed") CHECK_FALSE(ns->Resolve("class3/img004.jpg"));
  if (change == "renamed") CHECK(ns->Resolve("class4/zzz.jpg"));
  if (change == "renamed") CHECK_FALSE(ns->Resolve("class4/img000.jpg"));
  // The index written back shows it too, and the next mount finds nothing
  // changed (the directory's new times were recorded).
  auto saved = RequireOk(LoadIndex(f.index, &f.id));
  CHECK(Listing(*saved) == Listing(*ns));
  CountingBackend again(f.backend);
  OpenReport next;
  f.Open(IndexCheck::kDirs, &next, &again);
  Expect(next, true, false, false);
  CHECK(next.dirs_changed == 0);
  CHECK(again.counters().lists == 0);
}

TEST_CASE("A scan with a previous snapshot and no change flags stats and reuses directories",
          "[namespace_index]") {
  Fixture f;
  auto before = f.Scan();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  f.tree->Write("class2/new.jpg", "new");
  CountingBackend counting(f.backend);
  ScanReport report;
  auto after = RequireOk(ScanNamespace(&counting, {4, before.get(), nullptr, INT64_MAX}, &report));
  CHECK(CheckLayout(after->nodes(), after->arena(), after->totals()).ok());
  CHECK(Listing(*after) == Listing(*f.Scan()));
  CHECK(report.dirs_listed == 1);  // class2 only
  CHECK(report.dirs_reused == after->dir_count() - 1);
}

TEST_CASE("Two mounts racing to build one index scan once and share it", "[namespace_index]") {
  Fixture f;
  auto slow = std::make_shared<FaultBackend>(f.backend);
  slow->SetDelay(std::chrono::milliseconds(20));  // the first build takes a while
  CountingBackend a(slow), b(slow);
  OpenReport ra, rb;
  std::unique_ptr<Namespace> na, nb;
  Status ea, eb;
  auto open = [&f](OpenReport* report, Backend* via, std::unique_ptr<Namespace>* ns, Status* e) {
    Result<std::unique_ptr<Namespace>> opened = f.OpenQuietly(IndexCheck::kDirs, report, via);
    *e = opened.status();
    if (opened.ok()) *ns = std::move(opened).value();
  };
  std::thread first([&] { open(&ra, &a, &na, &ea); });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::thread second([&] { open(&rb, &b, &nb, &eb); });
  first.join();
  second.join();
  INFO(ea.ToString() << " / " << eb.ToString());
  REQUIRE(na);
  REQUIRE(nb);
  CHECK(ra.written + rb.written == 1);
  CHECK(a.counters().lists + b.counters().lists == na->dir_count());  // one scan in all
  CHECK(Dump(*na, false) == Dump(*nb, false));
  CHECK(LoadIndex(f.index, &f.id).ok());
  CHECK(::access((f.index + ".lock").c_str(), F_OK) != 0);
}

// Opens f's index with `wait_s` while its lock file exists (the caller wrote
// it); checks that the open scanned within 5 s and its first note.
void OpenPastLock(Fixture& f, unsigned wait_s, const std::string& note) {
  OpenOptions o;
  o.index = f.index;
  o.wait_s = wait_s;
  OpenReport report;
  auto start = std::chrono::steady_clock::now();
  REQUIRE(OpenNamespace(f.backend.get(), f.id, o, &report).ok());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(report.scanned);
  REQUIRE_FALSE(report.notes.empty());
  CHECK_THAT(report.notes[0], Catch::Contains(note));
}

TEST_CASE("A build lock held too long is waited for at most index_wait", "[namespace_index]") {
  Fixture f;
  REQUIRE(::close(::open((f.index + ".lock").c_str(), O_CREAT | O_WRONLY, 0600)) == 0);
  OpenPastLock(f, 1, "still locked");
}

TEST_CASE("A build lock left by a dead process on this host is not waited for",
          "[namespace_index]") {
  Fixture f;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  REQUIRE(::waitpid(dead, nullptr, 0) == dead);  // a pid that no longer exists
  std::ofstream(f.index + ".lock") << host << " " << dead << "\n";
  OpenPastLock(f, 30, "builder on this host died");
  CHECK(::access((f.index + ".lock").c_str(), F_OK) != 0);  // ours, taken and removed
}

TEST_CASE("A build lock another user planted is not waited for", "[namespace_index]") {
  Fixture f;
  REQUIRE(::close(::open((f.index + ".lock").c_str(), O_CREAT | O_WRONLY, 0600)) == 0);
  if (::geteuid() != 0) {
    WARN("skipped: needs root to give the lock to another user");
    return;
  }
  REQUIRE(::chown((f.index + ".lock").c_str(), 65534, 65534) == 0);
  OpenPastLock(f, 600, "belongs to uid 65534");
  CHECK(::access((f.index + ".lock").c_str(), F_OK) == 0);  // not ours to remove
}

TEST_CASE("A build lock dated in the future or not touched for 30 s is broken at once",
          "[namespace_index]") {
  for (long shift : {3600L, -90L}) {
    INFO("mtime shifted by " << shift << " s");
    Fixture f;
    std::ofstream(f.index + ".lock") << "another-node 4242\n";
    timespec times[2] = {{::time(nullptr) + shift, 0}, {::time(nullptr) + shift, 0}};
    REQUIRE(::utimensat(AT_FDCWD, (f.index + ".lock").c_str(), times, 0) == 0);
    OpenPastLock(f, 600, shift > 0 ? "in the future" : "stopped touching it");
    CHECK(::access((f.index + ".lock").c_str(), F_OK) != 0);  // broken, taken, removed
    CHECK(LoadIndex(f.index, &f.id).ok());                    // and the index built here
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

namespace tierfs {
namespace {

using testing::FaultFileIo;
using testing::FileOp;

// The index and its lock through a failing FileIo: the shared-index
// protocol meets a full device, a failing one, and a lock it cannot make.
struct FaultyIndex : Fixture {
  std::shared_ptr<FaultFileIo> io = std::make_shared<FaultFileIo>(DefaultFileIo());
  // Temporary files left beside the index.
  int Leftovers() const {
    int n = 0;
    const std::string dir = index.substr(0, index.rfind('/'));
    const std::string stem = index.substr(index.rfind('/') + 1) + ".tmp.";
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().filename().string().rfind(stem, 0) == 0) n++;
    }
    return n;
  }
  FaultyIndex() { io_for_open = io; }
  std::string Notes(const OpenReport& r) const {
    std::string all;
    for (const auto& n : r.notes) all += n + "\n";
    return all;
  }
};

TEST_CASE("Index faults: a full device while writing leaves the old index and no temporary file",
          "[namespace_index][faults]") {
  FaultyIndex f;
  f.Save();
  const std::string before = f.Bytes();
  f.io->Fail(FileOp::kWrite, ".tmp.", ENOSPC, /*after=*/1);  // the header goes, the nodes do not
  Status full = WriteIndex(*f.Scan(), f.id, RealtimeNanos(), f.index, f.io.get());
  CHECK(full.code() == ENOSPC);
  CHECK(full.message().find(std::strerror(ENOSPC)) != std::string::npos);
  CHECK(f.io->injected(FileOp::kWrite) == 1);
  CHECK(f.Bytes() == before);
  CHECK(f.Leftovers() == 0);
  // A failing sync or rename: the same.
  f.io->Heal();
  f.io->Fail(FileOp::kSync, ".tmp.", EIO);
  CHECK(WriteIndex(*f.Scan(), f.id, RealtimeNanos(), f.index, f.io.get()).code() == EIO);
  f.io->Heal();
  f.io->Fail(FileOp::kRename, ".tmp.", EIO);
  CHECK(WriteIndex(*f.Scan(), f.id, RealtimeNanos(), f.index, f.io.get()).code() == EIO);
  CHECK(f.Bytes() == before);
  CHECK(f.Leftovers() == 0);
  // A mount that cannot write its index serves the scan and says why.
  f.io->Heal();
  ::unlink(f.index.c_str());
  f.io->Fail(FileOp::kWrite, ".tmp.", ENOSPC);
  OpenReport report;
  auto ns = f.Open(IndexCheck::kDirs, &report);
  Expect(report, false, true, false);
  CHECK(f.Notes(report).find(std::strerror(ENOSPC)) != std::string::npos);
  CHECK(report.write_error.code() == ENOSPC);
  CHECK(Dump(*ns) == Dump(*f.Scan()));
}

TEST_CASE("Index faults: an index that cannot be mapped or read is refused and SOURCE scanned",
          "[namespace_index][faults]") {
  FaultyIndex f;
  f.Save();
  f.io->Fail(FileOp::kMap, ".index", EIO);
  Status unmapped = LoadIndex(f.index, &f.id, nullptr, f.io.get()).status();
  CHECK(unmapped.code() == EIO);
  CHECK(unmapped.message().find("cannot map it") != std::string::npos);
  CHECK(unmapped.message().find(std::strerror(EIO)) != std::string::npos);
  OpenReport report;
  auto ns = f.Open(IndexCheck::kNone, &report);
  CHECK(report.scanned);
  CHECK(f.Notes(report).find("cannot map it") != std::string::npos);
  CHECK(report.load_error.code() == EIO);
  CHECK(Listing(*ns) == Listing(*f.Scan()));
  // Reading the header fails the same way.
  f.io->Heal();
  f.io->Fail(FileOp::kRead, ".index", EIO);
  Status unread = LoadIndex(f.index, &f.id, nullptr, f.io.get()).status();
  CHECK(unread.code() == EIO);
  CHECK(unread.message().find("cannot read its header") != std::string::npos);
  f.io->Heal();
  CHECK(LoadIndex(f.index, &f.id, nullptr, f.io.get()).ok());
}

TEST_CASE("Index faults: a lock that cannot be created is reported and the node scans itself",
          "[namespace_index][faults]") {
  FaultyIndex f;
  f.io->Fail(FileOp::kOpen, ".lock", EACCES);
  OpenReport report;
  const auto start = std::chrono::steady_clock::now();
  auto ns = f.Open(IndexCheck::kDirs, &report);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));  // no wait for it
  CHECK(report.scanned);
  CHECK(f.Notes(report).find("cannot create") != std::string::npos);
  CHECK(f.Notes(report).find(std::strerror(EACCES)) != std::string::npos);
  CHECK(report.lock_error.code() == EACCES);
  CHECK(report.written);  // the index itself could still be written
  CHECK(f.io->injected(FileOp::kOpen) >= 1);
  CHECK(::access((f.index + ".lock").c_str(), F_OK) != 0);
  // The builder's heartbeat failing does not stop the build.
  f.io->Heal();
  ::unlink(f.index.c_str());
  f.io->Fail(FileOp::kTouch, ".lock", EIO);
  OpenReport again;
  f.Open(IndexCheck::kDirs, &again);
  CHECK(again.written);
}

}  // namespace
}  // namespace tierfs
