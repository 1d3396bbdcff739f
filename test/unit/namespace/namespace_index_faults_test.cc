// The saved namespace index and OpenNamespace through a failing FileIo: a
// full or failing device while the index is written, an index that cannot
// be mapped or read, a build lock that cannot be created or touched. Their
// other tests are in namespace_index_test.cc and namespace_open_test.cc.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "fault_file_io.h"
#include "namespace_index_fixture.h"

namespace tierfs {
namespace {

using testing::Dump;
using testing::Expect;
using testing::FaultFileIo;
using testing::FileOp;
using testing::Fixture;
using testing::Listing;

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
