// Namespace: an immutable, compact snapshot of SOURCE's tree, built once by
// ScanNamespace() and then served from memory. After the scan, lookups,
// attributes, listings and symlink targets never touch SOURCE.
//
// Layout: nodes are numbered in breadth-first order; the children of a
// directory are contiguous and sorted by name, so a lookup is a binary search
// and a listing is a range. Names and symlink targets live in one arena.
// The node array and the arena are either owned (a scan) or a read-only
// mapping of a saved index (tiering/namespace/namespace_index.h): the same bytes.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/status.h"
#include "tiering/io/backend.h"

namespace tierfs {

using NodeId = uint32_t;
inline constexpr NodeId kRootNode = 0;

struct Node {
  uint64_t size = 0;
  uint64_t blocks = 0;  // 512-byte blocks, as SOURCE reports (sparse files stay sparse)
  int64_t atime_ns = 0, mtime_ns = 0, ctime_ns = 0;
  uint32_t mode = 0, uid = 0, gid = 0, nlink = 0;
  NodeId parent = kRootNode;
  uint32_t name_off = 0, name_len = 0;
  // Directories: children are nodes [first_child, first_child + child_count).
  // Symlinks: the target is arena [first_child, first_child + child_count).
  uint32_t first_child = 0, child_count = 0;
  uint32_t reserved = 0;  // no padding: Nodes are written to index files as they are
  // SOURCE's st_ino: with size, mtime and ctime, the identity a file opened
  // later (or a tier copy reused) must have to be served as this node.
  // (st_dev is not kept: it differs between the nodes that share an index.)
  uint64_t ino = 0;
};
static_assert(sizeof(Node) == 88, "Node is saved as is in index files: bump kIndexVersion");

// A timestamp of struct stat in nanoseconds, as Node keeps them.
inline int64_t Nanos(const struct timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// What the scan counted, saved with the index.
struct NamespaceTotals {
  uint64_t file_bytes = 0, files = 0, dirs = 0, symlinks = 0, skipped = 0;
};

class Namespace {
 public:
  Namespace() = default;
  Namespace(const Namespace&) = delete;
  Namespace& operator=(const Namespace&) = delete;

  // Takes over a node array and arena that satisfy CheckLayout (or are
  // trusted: built by a scan). `keep_alive` owns the memory they point into.
  Namespace(std::span<const Node> nodes, std::string_view arena, const NamespaceTotals& totals,
            const struct statvfs& fs_stats, std::shared_ptr<const void> keep_alive);

  size_t size() const { return nodes_.size(); }
  const Node& node(NodeId id) const { return nodes_[id]; }
  bool valid(NodeId id) const { return id < nodes_.size(); }

  std::string_view name(NodeId id) const;
  // The target of a symlink node.
  std::string_view link_target(NodeId id) const;
  // The child of directory `dir` called `name`, if any.
  std::optional<NodeId> Lookup(NodeId dir, std::string_view name) const;
  // The child ids of directory `dir`, in name order.
  std::pair<NodeId, NodeId> Children(NodeId dir) const;
  // The path of a node relative to SOURCE's root ("" for the root).
  std::string Path(NodeId id) const;
  // Resolves a relative path ("a/b/c", no symlinks followed).
  std::optional<NodeId> Resolve(std::string_view rel) const;

  // Fills a struct stat for `id`; st_ino is id + ino_base.
  void Fill(NodeId id, uint64_t ino_base, struct stat* st) const;

  const struct statvfs& fs_stats() const { return fs_stats_; }
  uint64_t total_file_bytes() const { return totals_.file_bytes; }
  uint64_t file_count() const { return totals_.files; }
  uint64_t dir_count() const { return totals_.dirs; }
  uint64_t symlink_count() const { return totals_.symlinks; }
  uint64_t skipped_count() const { return totals_.skipped; }  // special files, unlistable dirs
  const NamespaceTotals& totals() const { return totals_; }
  std::span<const Node> nodes() const { return nodes_; }
  std::string_view arena() const { return arena_; }
  // Whether nodes/arena are a mapped index rather than heap memory.
  bool mapped() const { return mapped_; }
  void set_mapped(bool mapped) { mapped_ = mapped; }
  size_t memory_bytes() const;
  // files, directories, ... as gauges.
  void VisitCounters(CounterVisitor& v) const;

 private:
  std::span<const Node> nodes_;
  std::string_view arena_;
  NamespaceTotals totals_;
  struct statvfs fs_stats_ {};
  std::shared_ptr<const void> keep_alive_;  // owns what nodes_ and arena_ point into
  bool mapped_ = false;
};

// Checks that nodes and arena form a namespace every accessor can use without
// reading out of bounds or looping: the root is a directory, every name and
// symlink target lies in the arena, children ranges lie in the array, come
// after their parent, point back at it, are sorted and unique, and totals
// match. Returns ok or what is wrong (EUCLEAN: the structure is corrupt).
// Linear in the node count.
Status CheckLayout(std::span<const Node> nodes, std::string_view arena,
                   const NamespaceTotals& totals);

// scan_threads=auto: the scan's width (metadata requests in flight) starts at
// kScanTuneStart and is tuned while scanning, within [kScanTuneMin,
// kScanTuneMax], towards the most operations per second (tiering/base/hill_climber.h).
inline constexpr unsigned kScanTuneMin = 4, kScanTuneStart = 64, kScanTuneMax = 512;

struct ScanOptions {
  // Metadata requests in flight (a PFS is latency-bound); 0: tuned while
  // scanning (see kScanTuneStart).
  unsigned threads = 0;
  // A snapshot of the same SOURCE taken earlier (a saved index): directories
  // whose mtime and ctime did not change are taken from it instead of being
  // listed, so the scan costs one stat per such directory.
  const Namespace* previous = nullptr;
  // With `previous`: the result of ChangedDirectories as a flag per previous
  // node, so that directories known unchanged are not stat()ed again.
  const std::vector<bool>* changed = nullptr;
  // A directory of `previous` changed at or after this time (ns) may have
  // changed again within the same timestamp tick after it was listed: it is
  // listed again (git's "racy clean" rule). Set it to when `previous` was
  // taken, less a margin for coarse file system clocks.
  int64_t racy_after_ns = INT64_MIN;
  // Bytes of names and symlink targets a snapshot may hold: arena offsets
  // are 32 bits. Lower only in tests.
  uint64_t max_arena_bytes = UINT32_MAX;
  // With threads == 0: the width to start from, seconds between tuning steps.
  unsigned tune_start = kScanTuneStart;
  double tune_period_s = 0.25;
};

// What a scan asked of SOURCE. Updated by the scan's threads.
struct ScanReport {
  std::atomic<uint64_t> stats{0}, lists{0}, readlinks{0};
  std::atomic<uint64_t> dirs_listed{0};  // listed on SOURCE
  std::atomic<uint64_t> dirs_reused{0};  // taken from ScanOptions::previous
  std::atomic<uint64_t> entries{0};      // entries kept so far
  // The pool's width now and at most (requests in flight), and how many
  // tuning steps set it (0: a fixed width).
  std::atomic<unsigned> width{0}, peak_width{0};
  std::atomic<uint64_t> tune_steps{0};
  uint64_t meta_ops() const { return stats + lists + readlinks; }
};

// Scans SOURCE through `backend` in parallel. Fails (a message for the user)
// when the root cannot be scanned (the backend's errno) or the tree is too
// large for one snapshot (EOVERFLOW); subdirectories that cannot be listed
// are kept empty and counted in skipped_count().
// (Entries skipped in directories taken from `previous` are not counted.)
Result<std::unique_ptr<Namespace>> ScanNamespace(Backend* backend, const ScanOptions& options,
                                                 ScanReport* report = nullptr);

}  // namespace tierfs
