// OpenNamespace (tiering/namespace/namespace_open.h) over a saved index: a
// refused index makes it scan and write a good one, a valid one costs a stat
// per directory and no listing, a changed directory is listed again (a scan
// reuses a previous snapshot's unchanged ones), and the build lock: two
// mounts racing to build one index, a lock held too long, left by a dead
// process, planted by another user, dated in the future or not touched. The
// index file itself is tested in namespace_index_test.cc, both through a
// failing FileIo in namespace_index_faults_test.cc.
#include "tiering/namespace/namespace_open.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "fault_backend.h"
#include "namespace_index_fixture.h"
#include "require_ok.h"
#include "tiering/io/counting_backend.h"

namespace tierfs {
namespace {

using testing::Dump;
using testing::Expect;
using testing::FaultBackend;
using testing::Fixture;
using testing::Listing;

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

}  // namespace
}  // namespace tierfs
