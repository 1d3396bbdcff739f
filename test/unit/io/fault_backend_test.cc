// The test FaultBackend itself: later tests trust it to inject exactly what
// they ask for.
#include "fault_backend.h"

#include <catch2/catch.hpp>

#include "require_ok.h"
#include "temp_tree.h"

namespace tierfs {
namespace {

using testing::FaultBackend;
using testing::Op;
using testing::PatternBytes;
using testing::TempTree;

struct Faulty {
  TempTree tree;
  std::shared_ptr<FaultBackend> faults;

  Faulty() {
    tree.Mkdir("d");
    tree.Write("d/f", PatternBytes(1000, 1));
    tree.Write("g", "g");
    std::shared_ptr<Backend> posix = RequireOk(NewPosixBackend(tree.root()));
    faults = std::make_shared<FaultBackend>(posix);
  }
};

TEST_CASE("FaultBackend fails only the chosen operation and path", "[fault_backend]") {
  Faulty f;
  f.faults->Fail(Op::kList, "d", EACCES);
  std::vector<DirEntry> entries;
  CHECK(f.faults->list("d", &entries) == -EACCES);
  CHECK(f.faults->list("d", &entries) == -EACCES);
  CHECK(f.faults->list("", &entries) == 0);
  CHECK(entries.size() == 2);
  struct stat st;
  CHECK(f.faults->stat("d", &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK(f.faults->injected_failures() == 2);
  CHECK(f.faults->calls(Op::kList) == 3);
  CHECK(f.faults->calls(Op::kList, "d") == 2);
  CHECK(f.faults->calls(Op::kStat, "d") == 1);
  CHECK(f.faults->calls(Op::kOpen) == 0);
}

TEST_CASE("FaultBackend fails the next N calls, then forwards", "[fault_backend]") {
  Faulty f;
  f.faults->Fail(Op::kOpen, "g", ESTALE, 2);
  std::unique_ptr<SourceFile> file;
  CHECK(f.faults->open("g", &file) == -ESTALE);
  CHECK(f.faults->open("g", &file) == -ESTALE);
  CHECK(file == nullptr);
  CHECK(f.faults->open("g", &file) == 0);
  CHECK(file != nullptr);
  CHECK(f.faults->injected_failures() == 2);
}

TEST_CASE("FaultBackend FailAll fails every path, Heal removes faults", "[fault_backend]") {
  Faulty f;
  f.faults->FailAll(Op::kStat, EIO);
  struct stat st;
  CHECK(f.faults->stat("", &st) == -EIO);
  CHECK(f.faults->stat("d/f", &st) == -EIO);
  struct statvfs vfs;
  CHECK(f.faults->statfs(&vfs) == 0);
  f.faults->Heal();
  CHECK(f.faults->stat("d/f", &st) == 0);
  CHECK(st.st_size == 1000);
  CHECK(f.faults->calls(Op::kStat) == 3);  // counts survive Heal
}

TEST_CASE("FaultBackend fails and shortens reads of open files", "[fault_backend]") {
  Faulty f;
  std::unique_ptr<SourceFile> file;
  REQUIRE(f.faults->open("d/f", &file) == 0);
  std::string want = PatternBytes(1000, 1), buf(1000, '\0');
  CHECK(file->pread(buf.data(), 100, 50) == 100);
  CHECK(buf.compare(0, 100, want, 50, 100) == 0);
  f.faults->Shrink("d/f", 120);
  CHECK(file->pread(buf.data(), 100, 50) == 70);
  CHECK(buf.compare(0, 70, want, 50, 70) == 0);
  CHECK(file->pread(buf.data(), 100, 120) == 0);
  f.faults->Fail(Op::kRead, "d/f", EIO, 1);
  CHECK(file->pread(buf.data(), 10, 0) == -EIO);
  CHECK(file->pread(buf.data(), 10, 0) == 10);
  CHECK(f.faults->calls(Op::kRead, "d/f") == 5);
}

TEST_CASE("FaultBackend delays every call", "[fault_backend]") {
  Faulty f;
  f.faults->SetDelay(std::chrono::milliseconds(20));
  struct stat st;
  auto start = std::chrono::steady_clock::now();
  CHECK(f.faults->stat("g", &st) == 0);
  CHECK(f.faults->stat("g", &st) == 0);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(40));
}

}  // namespace
}  // namespace tierfs
