// Namespace: an immutable, compact snapshot of SOURCE's tree, built once by
// ScanNamespace() and then served from memory. After the scan, lookups,
// attributes, listings and symlink targets never touch SOURCE.
//
// Layout: nodes are numbered in breadth-first order; the children of a
// directory are contiguous and sorted by name, so a lookup is a binary search
// and a listing is a range. Names and symlink targets live in one arena.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tiering/backend.h"
#include "tiering/counter_visitor.h"

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
};

class Namespace {
 public:
  Namespace() = default;
  Namespace(const Namespace&) = delete;
  Namespace& operator=(const Namespace&) = delete;

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
  uint64_t total_file_bytes() const { return total_file_bytes_; }
  uint64_t file_count() const { return file_count_; }
  uint64_t dir_count() const { return dir_count_; }
  uint64_t symlink_count() const { return symlink_count_; }
  uint64_t skipped_count() const { return skipped_count_; }  // special files, unlistable dirs
  size_t memory_bytes() const;
  // files, directories, ... as gauges.
  void VisitCounters(CounterVisitor& v) const;

 private:
  friend class NamespaceBuilder;
  std::vector<Node> nodes_;
  std::string arena_;
  struct statvfs fs_stats_ {};
  uint64_t total_file_bytes_ = 0, file_count_ = 0, dir_count_ = 0, symlink_count_ = 0,
           skipped_count_ = 0;
};

struct ScanOptions {
  unsigned threads = 16;  // parallel directory listings; a PFS is latency-bound
};

// Scans SOURCE through `backend` in parallel. Returns nullptr and sets *error
// (a message for the user) when the root cannot be scanned; subdirectories
// that cannot be listed are kept empty and counted in skipped_count().
std::unique_ptr<Namespace> ScanNamespace(Backend* backend, const ScanOptions& options,
                                         std::string* error);

}  // namespace tierfs
