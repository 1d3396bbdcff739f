// The promotion stack over real files, for tests of Promoter and ReadPath:
// Source (files "f0", "f1", ... behind Counting(Fault(Posix)) and their
// snapshot) and Stack (a ChunkStore over given tiers, a started executor,
// promoter and read path).
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "eventually.h"
#include "fault_backend.h"
#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/engine/promoter.h"
#include "tiering/engine/read_path.h"
#include "tiering/io/counting_backend.h"

namespace tierfs::testing {

inline constexpr uint64_t kMiB = 1 << 20;

// SOURCE: files "f0", "f1", ... of the given sizes, read through
// Counting(Fault(Posix)), and their snapshot.
class Source {
 public:
  explicit Source(const std::vector<size_t>& sizes) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      contents_.push_back(PatternBytes(sizes[i], static_cast<unsigned>(i)));
      tree_.Write(Name(i), contents_.back());
    }
    std::shared_ptr<Backend> posix = RequireOk(NewPosixBackend(tree_.root()));
    faults_ = std::make_shared<FaultBackend>(posix);
    counting_ = std::make_unique<CountingBackend>(faults_);
    Rescan();
  }
  // Takes a new snapshot (after the files changed), as a remount would.
  void Rescan() {
    reader_.reset();
    ns_ = RequireOk(ScanNamespace(counting_.get(), ScanOptions{}));
    reader_ = std::make_unique<SourceReader>(counting_.get(), ns_.get(), 64);
  }
  // Replaces file i's bytes and sets its mtime to a time no scan has seen.
  void Rewrite(size_t i, std::string data) {
    contents_[i] = std::move(data);
    tree_.Write(Name(i), contents_[i]);
    struct timespec times[2] = {{0, UTIME_OMIT}, {1000000 + static_cast<time_t>(i), 0}};
    REQUIRE(::utimensat(AT_FDCWD, tree_.Abs(Name(i)).c_str(), times, 0) == 0);
  }

  static std::string Name(size_t i) { return fmt::format("f{}", i); }
  NodeId Id(size_t i) const { return *ns_->Resolve(Name(i)); }
  const std::string& Contents(size_t i) const { return contents_[i]; }
  size_t files() const { return contents_.size(); }
  uint64_t read_bytes() const { return counting_->counters().read_bytes; }
  FaultBackend& faults() { return *faults_; }
  const Namespace* ns() const { return ns_.get(); }
  SourceReader* reader() { return reader_.get(); }

 private:
  TempTree tree_;
  std::vector<std::string> contents_;
  std::shared_ptr<FaultBackend> faults_;
  std::unique_ptr<CountingBackend> counting_;
  std::unique_ptr<Namespace> ns_;
  std::unique_ptr<SourceReader> reader_;
};

// Reads [off, off+size) of `id` through `path`; returns the bytes, or "" and
// the error in *result.
inline std::string ReadVia(ReadPath& path, NodeId id, uint64_t off, size_t size, ssize_t* result) {
  std::vector<char> scratch(size);
  TierRead out;
  *result = path.Read(id, off, size, scratch.data(), &out);
  if (*result < 0) return "";
  // No REQUIRE here: Catch2 assertions are not thread-safe.
  if (out.size != static_cast<size_t>(*result)) return "out.size disagrees with the result";
  return std::string(out.data, out.size);
}

// What the promotion counters say, at one moment.
struct Promotions {
  uint64_t requested, done, failed, no_room, bytes, evicted;
};

// The promotion stack over `source`: a ChunkStore over the given tiers with
// a production policy by name, a started executor, promoter and read path.
class Stack {
 public:
  Stack(Source* source, std::vector<std::unique_ptr<Tier>> tiers, uint64_t chunk_size,
        const std::string& policy = "first-fit", unsigned threads = 4,
        std::chrono::milliseconds wait_limit = std::chrono::seconds(10), size_t queue = 1024)
      : source_(source) {
    auto catalog = std::make_unique<Catalog>(*source->ns(), chunk_size);
    auto p = NewEvictionPolicy(policy, static_cast<int>(tiers.size()), catalog.get());
    REQUIRE(p != nullptr);
    store_ = std::make_unique<ChunkStore>(source->ns(), std::move(catalog), std::move(tiers),
                                          std::move(p));
    executor_ = std::make_unique<Executor>(threads, queue);
    chunks_ = std::make_unique<ChunkSource>(source->reader(), chunk_size);
    promoter_ = std::make_unique<Promoter>(store_.get(), chunks_.get(), executor_.get());
    read_path_ = std::make_unique<ReadPath>(source->ns(), chunks_.get(), store_.get(),
                                            promoter_.get(), wait_limit);
    executor_->Start();
  }
  ~Stack() { executor_->Shutdown(); }

  // Reads file i whole and checks the bytes, then lets the promotions it
  // started finish (a reader wakes when the catalog changes, before the
  // promoter has updated its counters and the policy).
  void ReadFile(size_t i) {
    ssize_t r = 0;
    std::string got = Read(i, 0, source_->Contents(i).size() + 1, &r);
    REQUIRE(r == static_cast<ssize_t>(source_->Contents(i).size()));
    REQUIRE(got == source_->Contents(i));
    Drain();
  }
  std::string Read(size_t i, uint64_t off, size_t size, ssize_t* r) {
    return ReadVia(*read_path_, source_->Id(i), off, size, r);
  }
  uint8_t State(size_t i, uint32_t chunk = 0) const {
    return store_->state(ChunkKey{source_->Id(i), chunk});
  }
  bool Resident(size_t i) const { return Catalog::IsResident(State(i)); }
  // Waits until no promotion is queued or running.
  void Drain() const {
    bool idle = Eventually([this] {
      return executor_->queued(Executor::Lane::kForeground) == 0 &&
             executor_->queued(Executor::Lane::kBackground) == 0 && executor_->running() == 0;
    });
    if (!idle) FAIL("promotions did not finish");
  }

  Tier& tier(size_t i) { return *store_->tiers()[i]; }
  const Catalog& catalog() const { return store_->catalog(); }
  Promotions promotions() const {
    const StoreCounters& c = store_->counters();
    return {promoter_->requested(), c.done, c.failed, c.no_room, c.bytes, c.evicted};
  }
  const ReadCounters& reads() const { return read_path_->counters(); }
  ReadPath& read_path() { return *read_path_; }
  const Promoter& promoter() const { return *promoter_; }
  Promoter& promoter() { return *promoter_; }
  Executor& executor() { return *executor_; }
  ChunkStore& store() { return *store_; }

 private:
  Source* const source_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<ChunkSource> chunks_;
  std::unique_ptr<Promoter> promoter_;
  std::unique_ptr<ReadPath> read_path_;
};

inline std::vector<std::unique_ptr<Tier>> Ram(uint64_t budget) {
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(NewMemoryTier("ram", budget));
  return tiers;
}

}  // namespace tierfs::testing
