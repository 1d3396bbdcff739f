// Internal to tierfs_namespace: the scan's temporary tree (ScanDir) and the
// pool that walks SOURCE into it (ParallelScanner), shared by
// namespace_scan.cc (ScanNamespace, and the snapshot Build lays out from the
// tree) and namespace_scan_walk.cc (the walk: ParallelScanner's listing,
// stat()ing and tuning). Not for other libraries.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tiering/base/executor.h"
#include "tiering/base/hill_climber.h"
#include "tiering/base/mutex.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {
namespace scan_internal {

constexpr NodeId kNoNode = UINT32_MAX;

// One scanned directory, compact: its kept entries as Nodes (sorted by name;
// name_off into `names`; a symlink's target at first_child into `targets`; a
// directory's ScanDir at first_child into `subdirs`).
struct ScanDir {
  std::vector<Node> nodes;
  std::string names, targets;
  std::vector<std::unique_ptr<ScanDir>> subdirs;
  uint64_t skipped = 0;
};

// A node's attributes from lstat (tree fields left for the builder). With
// unstable inode numbers (Backend::stable_inodes) the inode is left 0:
// unknown, never compared.
Node NodeOf(const struct stat& st, bool stable_inodes);

// The scanned tree laid out breadth-first into one node array and one arena.
// Fails (EOVERFLOW) when the tree does not fit the 32-bit node ids and arena
// offsets.
Result<std::unique_ptr<Namespace>> Build(const Node& root_node, ScanDir* root,
                                         const struct statvfs& fs_stats, uint64_t max_arena);

class ParallelScanner {
 public:
  ParallelScanner(Backend* backend, const ScanOptions& options, ScanReport* report);

  // Scans the tree below the root, whose attributes are *root_node (from a
  // fresh stat); returns -errno if the root cannot be listed, -ENOMEM if
  // the scan ran out of memory.
  int Run(ScanDir* root, Node* root_node);

 private:
  struct ScanListing;
  struct Job {
    ScanDir* dir = nullptr;
    std::string path;
    NodeId old = kNoNode;  // the directory in previous_, if it was there
    Node* self = nullptr;  // the directory's own node in its parent's ScanDir
    bool fresh = false;    // *self comes from a listing now, not from previous_
    // A chunk of a large directory's entries to stat, instead of a directory.
    std::shared_ptr<ScanListing> listing;
    size_t begin = 0, end = 0;
  };

  // Every job queued has been scanned: none is left to queue more.
  bool Done() const REQUIRES(mu_) { return outstanding_ == 0; }

  void Tune();
  // Queues `job` on the pool: a stat chunk `first` (ahead of the
  // directories waiting), a directory last.
  void Submit(Job job, Executor::Place place);
  void Work(Job& job);
  bool Unchanged(Job& job);
  int ScanOne(Job job, bool log);
  void StatChunk(const Job& job);
  void StatRange(ScanListing& l, size_t begin, size_t end);
  void Finish(const Job& job, ScanListing& l, std::vector<Job>* jobs);
  void Queue(ScanDir* dir, std::vector<Job>* jobs) EXCLUDES(mu_);
  static std::string Child(const std::string& path, std::string_view name);
  static std::string_view Name(const ScanDir& dir, size_t i);
  static void AddEntry(ScanDir* dir, Node n, std::string_view name, std::string_view target);
  static Job SubdirJob(const Job& parent, ScanDir* dir, size_t i, NodeId old, bool fresh);

  Backend* const backend_;
  const bool tuned_;
  HillClimber climber_;  // used by Tune's thread only
  const Namespace* const previous_;
  const std::vector<bool>* const changed_;
  const int64_t racy_after_ns_;
  const double period_;
  ScanReport* const report_;
  // The scan's threads: at most the width's jobs at once (its active
  // limit); the tuner grows it. One lane: a directory's stat chunks go
  // ahead of the directories waiting. Its queue is bounded by the tree:
  // each directory and each chunk of a listing is queued once.
  Executor pool_;
  Mutex mu_;                                // guards outstanding_; a leaf lock
  CondVar done_cv_;                         // Run and Tune: the scan is done
  size_t outstanding_ GUARDED_BY(mu_) = 0;  // jobs queued or being scanned
  std::atomic<bool> starved_{false};        // the queue ran dry since the last tuning step
  std::atomic<bool> failed_{false};         // a job threw (out of memory): the scan fails
};

}  // namespace scan_internal
}  // namespace tierfs
