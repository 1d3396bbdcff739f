// SourceReader and OpenFileCache, over real files behind a FaultBackend.
#include "tiering/source/source_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <random>
#include <thread>

#include "fault_backend.h"
#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/io/counting_backend.h"

namespace tierfs {
namespace {

using testing::FaultBackend;
using testing::Op;
using testing::PatternBytes;
using testing::TempTree;

// Files "f000", "f001", ... of PatternBytes(size, i), scanned into a snapshot
// that is read through Counting(Fault(Posix)).
class Dataset {
 public:
  Dataset(int files, size_t size) {
    for (int i = 0; i < files; ++i) {
      contents_.push_back(PatternBytes(size + static_cast<size_t>(i), static_cast<unsigned>(i)));
      tree_.Write(Name(i), contents_.back());
    }
    std::shared_ptr<Backend> posix = RequireOk(NewPosixBackend(tree_.root()));
    faults_ = std::make_shared<FaultBackend>(posix);
    counting_ = std::make_unique<CountingBackend>(faults_);
    ns_ = RequireOk(ScanNamespace(counting_.get(), ScanOptions{}));
    REQUIRE(ns_->file_count() == static_cast<uint64_t>(files));
  }

  static std::string Name(int i) { return fmt::format("f{:03}", i); }
  NodeId Id(int i) const { return *ns_->Resolve(Name(i)); }
  const std::string& Contents(int i) const { return contents_[static_cast<size_t>(i)]; }

  const TempTree& tree() const { return tree_; }
  FaultBackend& faults() { return *faults_; }
  CountingBackend* backend() { return counting_.get(); }
  const Namespace* ns() const { return ns_.get(); }

 private:
  TempTree tree_;
  std::vector<std::string> contents_;
  std::shared_ptr<FaultBackend> faults_;
  std::unique_ptr<CountingBackend> counting_;
  std::unique_ptr<Namespace> ns_;
};

// Reads [off, off+size) of file i; returns the result and fills *data.
ssize_t ReadAt(SourceReader& reader, const Dataset& d, int i, uint64_t off, size_t size,
               std::string* data) {
  data->assign(size, '\0');
  ssize_t n = reader.Read(d.Id(i), off, size, data->data());
  data->resize(n > 0 ? static_cast<size_t>(n) : 0);
  return n;
}

TEST_CASE("SourceReader reads the bytes at an offset", "[source_reader]") {
  Dataset d(2, 100000);
  SourceReader reader(d.backend(), d.ns(), 64);
  const std::string& want = d.Contents(1);  // 100001 bytes
  std::string got;
  CHECK(ReadAt(reader, d, 1, 0, 4096, &got) == 4096);
  CHECK(got == want.substr(0, 4096));
  CHECK(ReadAt(reader, d, 1, 12345, 777, &got) == 777);
  CHECK(got == want.substr(12345, 777));
  CHECK(ReadAt(reader, d, 0, 99999, 1, &got) == 1);
  CHECK(got == d.Contents(0).substr(99999));
  CHECK(reader.failed_reads() == 0);
}

TEST_CASE("SourceReader stops at the snapshot's EOF", "[source_reader]") {
  Dataset d(1, 1000);
  SourceReader reader(d.backend(), d.ns(), 64);
  std::string got;
  CHECK(ReadAt(reader, d, 0, 990, 100, &got) == 10);  // straddles EOF
  CHECK(got == d.Contents(0).substr(990));
  CHECK(ReadAt(reader, d, 0, 0, 5000, &got) == 1000);
  CHECK(got == d.Contents(0));
  CHECK(ReadAt(reader, d, 0, 1000, 100, &got) == 0);  // at EOF
  CHECK(ReadAt(reader, d, 0, 1u << 20, 100, &got) == 0);
  CHECK(ReadAt(reader, d, 0, 10, 0, &got) == 0);
  CHECK(d.faults().calls(Op::kRead) == 2);  // reads at or past EOF never reach SOURCE
  CHECK(reader.failed_reads() == 0);
}

TEST_CASE("SourceReader turns a failing open into EIO", "[source_reader]") {
  Dataset d(2, 100);
  SourceReader reader(d.backend(), d.ns(), 64);
  d.faults().Fail(Op::kOpen, Dataset::Name(0), EACCES, 1);
  std::string got;
  CHECK(ReadAt(reader, d, 0, 0, 10, &got) == -EIO);
  CHECK(reader.failed_reads() == 1);
  CHECK(d.backend()->counters().errors == 1);
  CHECK(ReadAt(reader, d, 1, 0, 10, &got) == 10);
  // A failed open is not cached: the next read opens again.
  CHECK(ReadAt(reader, d, 0, 0, 10, &got) == 10);
  CHECK(got == d.Contents(0).substr(0, 10));
  CHECK(d.faults().calls(Op::kOpen, Dataset::Name(0)) == 2);
  CHECK(reader.failed_reads() == 1);
}

TEST_CASE("SourceReader turns a failing read into EIO", "[source_reader]") {
  Dataset d(2, 100);
  SourceReader reader(d.backend(), d.ns(), 64);
  std::string got;
  CHECK(ReadAt(reader, d, 0, 0, 10, &got) == 10);  // open before the fault
  d.faults().Fail(Op::kRead, Dataset::Name(0), ENXIO);
  CHECK(ReadAt(reader, d, 0, 0, 10, &got) == -EIO);
  CHECK(ReadAt(reader, d, 0, 50, 10, &got) == -EIO);
  CHECK(reader.failed_reads() == 2);
  CHECK(ReadAt(reader, d, 1, 0, 10, &got) == 10);
  CHECK(got == d.Contents(1).substr(0, 10));
}

TEST_CASE("SourceReader fails a file that shrank rather than return short data",
          "[source_reader]") {
  Dataset d(2, 1000);
  SourceReader reader(d.backend(), d.ns(), 64);
  std::string got;
  SECTION("short reads from the backend") {
    d.faults().Shrink(Dataset::Name(0), 500);
    CHECK(ReadAt(reader, d, 0, 400, 200, &got) == -EIO);
    CHECK(ReadAt(reader, d, 0, 600, 10, &got) == -EIO);
    CHECK(ReadAt(reader, d, 0, 0, 1000, &got) == -EIO);
    CHECK(reader.failed_reads() == 3);
    CHECK(ReadAt(reader, d, 0, 100, 400, &got) == 400);  // what is left still reads
    CHECK(got == d.Contents(0).substr(100, 400));
  }
  SECTION("the file truncated on SOURCE") {
    CHECK(ReadAt(reader, d, 0, 0, 10, &got) == 10);  // open before the truncation
    d.tree().Truncate(Dataset::Name(0), 500);
    CHECK(ReadAt(reader, d, 0, 400, 200, &got) == -EIO);
    CHECK(reader.failed_reads() == 1);
  }
  CHECK(ReadAt(reader, d, 1, 0, 1001, &got) == 1001);
  CHECK(got == d.Contents(1));
}

TEST_CASE("SourceReader fails a file deleted after the scan, serves the rest", "[source_reader]") {
  Dataset d(3, 100);
  SourceReader reader(d.backend(), d.ns(), 64);
  d.tree().Remove(Dataset::Name(1));
  std::string got;
  CHECK(ReadAt(reader, d, 1, 0, 10, &got) == -EIO);
  CHECK(reader.failed_reads() == 1);
  CHECK(ReadAt(reader, d, 0, 0, 100, &got) == 100);
  CHECK(got == d.Contents(0));
  CHECK(ReadAt(reader, d, 2, 5, 50, &got) == 50);
  CHECK(got == d.Contents(2).substr(5, 50));
}

TEST_CASE("OpenFileCache stays within its capacity", "[open_file_cache]") {
  Dataset d(200, 100);
  SourceReader reader(d.backend(), d.ns(), 16);
  const OpenFileCache& cache = reader.open_files();
  CHECK(cache.capacity() == 16);
  std::string got;
  for (int i = 0; i < 200; ++i) {
    REQUIRE(ReadAt(reader, d, i, 0, 10, &got) == 10);
    CHECK(cache.open_files() <= cache.capacity());
  }
  CHECK(cache.misses() == 200);
  CHECK(cache.hits() == 0);
  CHECK(cache.open_files() == 16);  // one per shard: ids spread over all 16
  CHECK(cache.evictions() == cache.misses() - cache.open_files());
  CHECK(d.backend()->counters().opens == cache.misses());
  // The most recent file of each shard is still open.
  for (int i = 199; i >= 184; --i) REQUIRE(ReadAt(reader, d, i, 10, 10, &got) == 10);
  CHECK(cache.hits() == 16);
  CHECK(cache.misses() == 200);
  CHECK(ReadAt(reader, d, 0, 0, 10, &got) == 10);
  CHECK(cache.misses() == 201);
  CHECK(cache.evictions() == 185);
  CHECK(cache.open_files() == 16);
}

TEST_CASE("OpenFileCache counts a failed open as a miss and caches nothing", "[open_file_cache]") {
  Dataset d(2, 100);
  OpenFileCache cache(d.backend(), d.ns(), 5);
  CHECK(cache.capacity() == 16);  // at least one file per shard
  d.faults().Fail(Op::kOpen, Dataset::Name(0), EMFILE);
  std::shared_ptr<SourceFile> file;
  CHECK(cache.Get(d.Id(0), &file) == -EMFILE);
  CHECK(file == nullptr);
  CHECK(cache.misses() == 1);
  CHECK(cache.open_files() == 0);
  CHECK(cache.Get(d.Id(1), &file) == 0);
  std::shared_ptr<SourceFile> again;
  CHECK(cache.Get(d.Id(1), &again) == 0);
  CHECK(again == file);
  CHECK(cache.hits() == 1);
  CHECK(cache.open_files() == 1);
}

TEST_CASE("OpenFileCache keeps an evicted file usable by its reader", "[open_file_cache]") {
  Dataset d(64, 100);
  OpenFileCache cache(d.backend(), d.ns(), 16);
  std::shared_ptr<SourceFile> held;
  REQUIRE(cache.Get(d.Id(0), &held) == 0);
  for (int i = 1; i < 64; ++i) {
    std::shared_ptr<SourceFile> f;
    REQUIRE(cache.Get(d.Id(i), &f) == 0);
  }
  CHECK(cache.evictions() == 48);
  std::string buf(100, '\0');
  CHECK(held->pread(buf.data(), buf.size(), 0) == 100);
  CHECK(buf == d.Contents(0));
  std::shared_ptr<SourceFile> reopened;
  REQUIRE(cache.Get(d.Id(0), &reopened) == 0);
  CHECK(reopened != held);
  CHECK(cache.misses() == 65);
}

TEST_CASE("SourceReader serves 8 concurrent readers the right bytes", "[source_reader]") {
  constexpr int kFiles = 64, kThreads = 8, kReadsPerThread = 2000;
  Dataset d(kFiles, 20000);
  SourceReader reader(d.backend(), d.ns(), 16);  // small: readers race with evictions
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::string buf(8192, '\0');
      for (int r = 0; r < kReadsPerThread; ++r) {
        int i = static_cast<int>(rng() % kFiles);
        const std::string& want = d.Contents(i);
        uint64_t off = rng() % want.size();
        size_t size = 1 + rng() % buf.size();
        ssize_t n = reader.Read(d.Id(i), off, size, buf.data());
        size_t expected = std::min<size_t>(size, want.size() - off);
        if (n != static_cast<ssize_t>(expected)) {
          failed++;
        } else if (buf.compare(0, expected, want, off, expected) != 0) {
          wrong++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failed == 0);
  CHECK(wrong == 0);
  const OpenFileCache& cache = reader.open_files();
  CHECK(cache.hits() + cache.misses() == kThreads * kReadsPerThread);
  CHECK(cache.open_files() <= cache.capacity());
  CHECK(cache.misses() >= kFiles);
  CHECK(reader.failed_reads() == 0);
  CHECK(d.backend()->counters().reads == kThreads * kReadsPerThread);
}

// Sets the mtime of `path` back to what it was (as cp -p, rsync -a, tar x do).
void KeepMtime(const std::string& path, const struct stat& before) {
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

TEST_CASE("SourceReader never serves a file that is not the snapshot's (issue 11 items 5-6)",
          "[source_reader]") {
  Dataset d(2, 1000);
  SourceReader reader(d.backend(), d.ns(), 64);
  const std::string path = d.tree().Abs(Dataset::Name(0));
  struct stat before;
  REQUIRE(::stat(path.c_str(), &before) == 0);
  const std::string other = PatternBytes(1000, 77);  // same size, other bytes
  std::string got;
  SECTION("replaced by another file of the same size and mtime (a new inode)") {
    d.tree().Write("new", other);
    KeepMtime(d.tree().Abs("new"), before);
    REQUIRE(::rename(d.tree().Abs("new").c_str(), path.c_str()) == 0);
  }
  SECTION("rewritten in place, same size, mtime kept") {
    d.tree().Write(Dataset::Name(0), other);
    KeepMtime(path, before);
    struct stat after;
    REQUIRE(::stat(path.c_str(), &after) == 0);
    REQUIRE(after.st_ino == before.st_ino);
  }
  SECTION("grown") { d.tree().Write(Dataset::Name(0), d.Contents(0) + "more"); }
  SECTION("replaced by a directory") {
    REQUIRE(::unlink(path.c_str()) == 0);
    REQUIRE(::mkdir(path.c_str(), 0755) == 0);
  }
  CHECK(ReadAt(reader, d, 0, 0, 100, &got) == -EIO);
  CHECK(ReadAt(reader, d, 0, 500, 100, &got) == -EIO);  // every read, not only the first
  CHECK(reader.failed_reads() == 2);
  CHECK(ReadAt(reader, d, 1, 0, 100, &got) == 100);  // the others are served
  CHECK(got == d.Contents(1).substr(0, 100));
}

TEST_CASE("SourceReader keeps serving the file it opened when SOURCE replaces it later",
          "[source_reader]") {
  Dataset d(1, 1000);
  SourceReader reader(d.backend(), d.ns(), 64);
  std::string got;
  REQUIRE(ReadAt(reader, d, 0, 0, 10, &got) == 10);  // opened and checked
  d.tree().Write("new", PatternBytes(1000, 77));
  REQUIRE(::rename(d.tree().Abs("new").c_str(), d.tree().Abs(Dataset::Name(0)).c_str()) == 0);
  // The open file is the snapshot's version: all of it comes from that one.
  CHECK(ReadAt(reader, d, 0, 0, 1000, &got) == 1000);
  CHECK(got == d.Contents(0));
}

}  // namespace
}  // namespace tierfs
