// The scan's width (metadata requests in flight): fixed when scan_threads
// is a number, tuned while scanning when it is auto, against a simulated
// metadata server that serves a bounded number of requests at once; and a
// scan whose pool thread runs out of memory.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>

#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {
namespace {

using testing::TempTree;

// SlowMds: serves at most `slots` metadata requests at once, each taking
// `latency` (a PFS's metadata server); the rest queue. Records the most
// requests its clients ever had in flight at once.
class SlowMds final : public BackendWrapper {
 public:
  SlowMds(std::shared_ptr<Backend> target, unsigned slots, std::chrono::microseconds latency)
      : BackendWrapper(std::move(target)), slots_(slots), latency_(latency) {}

  int stat(const std::string& rel, struct stat* st) override {
    Serve();
    return target()->stat(rel, st);
  }
  int open_dir(const std::string& rel, std::unique_ptr<SourceDir>* out) override {
    Serve();
    std::unique_ptr<SourceDir> dir;
    int err = target()->open_dir(rel, &dir);
    if (err < 0) return err;
    *out = std::make_unique<Dir>(this, std::move(dir));
    return 0;
  }
  unsigned most_in_flight() const {
    std::lock_guard lock(mu_);
    return most_;
  }

 private:
  class Dir final : public SourceDir {
   public:
    Dir(SlowMds* mds, std::unique_ptr<SourceDir> dir) : mds_(mds), dir_(std::move(dir)) {}
    const std::vector<std::string>& names() const override { return dir_->names(); }
    int lstat(const std::string& name, struct stat* st) override {
      mds_->Serve();
      return dir_->lstat(name, st);
    }

   private:
    SlowMds* const mds_;
    std::unique_ptr<SourceDir> dir_;
  };

  void Serve() {
    {
      std::unique_lock lock(mu_);
      most_ = std::max(most_, ++in_flight_);
      cv_.wait(lock, [this] { return busy_ < slots_; });
      ++busy_;
    }
    std::this_thread::sleep_for(latency_);
    {
      std::lock_guard lock(mu_);
      --busy_;
      --in_flight_;
    }
    cv_.notify_one();
  }

  const unsigned slots_;
  const std::chrono::microseconds latency_;
  mutable std::mutex mu_;  // guards the counts below
  std::condition_variable cv_;
  unsigned busy_ = 0, in_flight_ = 0, most_ = 0;
};

// 16 directories of 250 files (ImageNet's shape, smaller).
const TempTree& Classes() {
  static TempTree* tree = [] {
    auto* t = new TempTree;
    for (int d = 0; d < 16; ++d) {
      std::string dir =
          std::string("c").append(std::to_string(d));  // not "lit" + string: GCC PR 105651
      t->Mkdir(dir);
      for (int f = 0; f < 250; ++f) t->Write(dir + "/f" + std::to_string(f), "x");
    }
    return t;
  }();
  return *tree;
}

std::shared_ptr<Backend> Posix() { return RequireOk(NewPosixBackend(Classes().root())); }

std::unique_ptr<Namespace> MustScan(Backend* backend, const ScanOptions& options,
                                    ScanReport* report) {
  return RequireOk(ScanNamespace(backend, options, report));
}

// A scan with scan_threads=auto from width `start`, tuned every `period_s`.
std::unique_ptr<Namespace> TunedScan(Backend* backend, unsigned start, double period_s,
                                     ScanReport* report) {
  ScanOptions options;
  options.threads = 0;
  options.tune_start = start;
  options.tune_period_s = period_s;
  return MustScan(backend, options, report);
}

// Every attribute that two scans of an unchanged tree agree on (not atime).
void RequireSameTree(const Namespace& a, const Namespace& b) {
  REQUIRE(a.size() == b.size());
  for (NodeId id = 0; id < a.size(); ++id) {
    const Node &x = a.node(id), &y = b.node(id);
    INFO("node " << id);
    REQUIRE(a.name(id) == b.name(id));
    REQUIRE((x.size == y.size && x.mode == y.mode && x.mtime_ns == y.mtime_ns && x.ino == y.ino &&
             x.parent == y.parent && x.first_child == y.first_child &&
             x.child_count == y.child_count));
  }
}

TEST_CASE("A fixed scan width is never exceeded and not tuned", "[scan_tuning]") {
  SlowMds mds(Posix(), 64, std::chrono::microseconds(200));
  ScanReport report;
  ScanOptions options;
  options.threads = 3;
  auto ns = MustScan(&mds, options, &report);
  CHECK(ns->file_count() == 16 * 250);
  CHECK(mds.most_in_flight() <= 3);
  CHECK(report.width == 3);
  CHECK(report.peak_width == 3);
  CHECK(report.tune_steps == 0);
}

TEST_CASE("A tuned scan widens while the metadata server rewards it", "[scan_tuning]") {
  // 24 at once, 2 ms each: 4 in flight make 2,000 operations/s, 8 make
  // 4,000, 16 make 8,000, 24 and more 12,000.
  SlowMds mds(Posix(), 24, std::chrono::milliseconds(2));
  ScanReport report;
  auto ns = TunedScan(&mds, 4, 0.02, &report);
  CHECK(report.tune_steps >= 3);
  CHECK(report.peak_width >= 16);
  CHECK(mds.most_in_flight() >= 16);
  CHECK(mds.most_in_flight() <= report.peak_width);
  RequireSameTree(*ns, *MustScan(Posix().get(), ScanOptions{4}, nullptr));
}

TEST_CASE("A tuned scan does not pile requests on a server that cannot take them",
          "[scan_tuning]") {
  // 4 at once: the start width (8) already queues at the server; doubling
  // it gains a few percent at most (a waiter is always ready for a free
  // slot), not worth the server's queue: a doubling (made when noise looked
  // like a gain) is undone and the scan ends no wider than one doubling.
  // Steps of 0.1 s (about 200 operations each): with 0.05 s a loaded
  // machine (the whole suite in parallel on 2 cores) once made noise look
  // like a gain twice over (width 32).
  SlowMds mds(Posix(), 4, std::chrono::milliseconds(2));
  ScanReport report;
  auto ns = TunedScan(&mds, 8, 0.1, &report);
  CHECK(ns->file_count() == 16 * 250);
  CHECK(report.tune_steps >= 3);
  CHECK(report.width <= 16);
  CHECK(mds.most_in_flight() <= report.peak_width);
}

// Runs out of memory listing one directory.
class NoMemoryFor final : public BackendWrapper {
 public:
  NoMemoryFor(std::shared_ptr<Backend> target, std::string dir)
      : BackendWrapper(std::move(target)), dir_(std::move(dir)) {}
  int open_dir(const std::string& rel, std::unique_ptr<SourceDir>* out) override {
    if (rel == dir_) throw std::bad_alloc();
    return target()->open_dir(rel, out);
  }

 private:
  const std::string dir_;
};

TEST_CASE("A scan that runs out of memory on a pool thread fails, whole", "[scan_tuning]") {
  // Not a crash, not a hang, and not a tree with one directory shown empty.
  for (unsigned threads : {0u, 3u}) {
    NoMemoryFor backend(Posix(), "c7");
    ScanOptions options;
    options.threads = threads;
    auto ns = ScanNamespace(&backend, options, nullptr);
    REQUIRE_FALSE(ns.ok());
    CHECK(ns.status().code() == ENOMEM);
  }
}

}  // namespace
}  // namespace tierfs
