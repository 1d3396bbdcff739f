// The parallel namespace scan's entry (ScanNamespace) and the snapshot it
// builds: the scanned tree laid out breadth-first into one node array and
// one arena. The walk that fills the tree (the pool of threads, its tuning,
// the reuse of a previous snapshot's directories) is in
// namespace_scan_walk.cc; what both share in namespace_scan_internal.h.
#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <deque>

#include "tiering/namespace/namespace_scan_internal.h"

namespace tierfs {
namespace scan_internal {

Node NodeOf(const struct stat& st, bool stable_inodes) {
  Node n;
  n.size = static_cast<uint64_t>(st.st_size);
  n.blocks = static_cast<uint64_t>(st.st_blocks);
  n.atime_ns = Nanos(st.st_atim);
  n.mtime_ns = Nanos(st.st_mtim);
  n.ctime_ns = Nanos(st.st_ctim);
  n.mode = st.st_mode;
  n.uid = st.st_uid;
  n.gid = st.st_gid;
  n.nlink = static_cast<uint32_t>(st.st_nlink);
  n.ino = stable_inodes ? static_cast<uint64_t>(st.st_ino) : 0;
  return n;
}

Result<std::unique_ptr<Namespace>> Build(const Node& root_node, ScanDir* root,
                                         const struct statvfs& fs_stats, uint64_t max_arena) {
  struct Storage {
    std::vector<Node> nodes;
    std::string arena;
  };
  // Sizes first, so the arrays are allocated once at their final size.
  size_t node_count = 1, arena_size = 0;
  {
    std::vector<ScanDir*> stack{root};
    while (!stack.empty()) {
      ScanDir* d = stack.back();
      stack.pop_back();
      node_count += d->nodes.size();
      arena_size += d->names.size() + d->targets.size();
      for (auto& s : d->subdirs) stack.push_back(s.get());
    }
  }
  // Offsets are 32 bits (Node is saved as is): a bigger tree would wrap them
  // silently and serve one entry's name as another's.
  if (arena_size > max_arena || node_count >= kNoNode) {
    return Status::Error(
        EOVERFLOW,
        fmt::format(
            "SOURCE is too large for one mount: {} entries with {} bytes of names and symlink "
            "targets (at most {} entries and {} bytes); mount a subdirectory",
            node_count, arena_size, kNoNode - 1, max_arena));
  }
  auto storage = std::make_shared<Storage>();
  std::vector<Node>& nodes = storage->nodes;
  std::string& arena = storage->arena;
  nodes.reserve(node_count);
  arena.reserve(arena_size);
  NamespaceTotals totals;
  nodes.push_back(root_node);
  nodes[0].parent = kRootNode;
  nodes[0].name_off = nodes[0].name_len = 0;
  totals.dirs = 1;
  std::deque<std::pair<NodeId, ScanDir*>> queue{{kRootNode, root}};
  while (!queue.empty()) {
    auto [id, dir] = queue.front();
    queue.pop_front();
    totals.skipped += dir->skipped;
    nodes[id].first_child = static_cast<uint32_t>(nodes.size());
    nodes[id].child_count = static_cast<uint32_t>(dir->nodes.size());
    for (const Node& e : dir->nodes) {
      NodeId child = static_cast<NodeId>(nodes.size());
      Node n = e;
      n.parent = id;
      n.name_off = static_cast<uint32_t>(arena.size());
      arena.append(dir->names, e.name_off, e.name_len);
      if (S_ISDIR(n.mode)) {
        totals.dirs++;
        queue.emplace_back(child, dir->subdirs[e.first_child].get());
      } else if (S_ISLNK(n.mode)) {
        totals.symlinks++;
        n.first_child = static_cast<uint32_t>(arena.size());
        arena.append(dir->targets, e.first_child, e.child_count);
      } else {
        totals.files++;
        totals.file_bytes += n.size;
      }
      nodes.push_back(n);
    }
    dir->nodes = {};  // free as we go: the scan result may be large
    dir->names = {};
    dir->targets = {};
  }
  std::span<const Node> node_span(storage->nodes);
  std::string_view arena_view(storage->arena);
  return std::make_unique<Namespace>(node_span, arena_view, totals, fs_stats, std::move(storage));
}

}  // namespace scan_internal

using scan_internal::Build;
using scan_internal::NodeOf;
using scan_internal::ParallelScanner;
using scan_internal::ScanDir;

Result<std::unique_ptr<Namespace>> ScanNamespace(Backend* backend, const ScanOptions& options,
                                                 ScanReport* report) {
  ScanReport local;
  if (report == nullptr) report = &local;
  struct stat root_st;
  report->stats++;
  int err = backend->stat("", &root_st);
  if (err == 0 && !S_ISDIR(root_st.st_mode)) err = -ENOTDIR;
  if (err < 0) return Status::FromErrno(-err, "cannot scan SOURCE");
  Node root_node = NodeOf(root_st, backend->stable_inodes());
  // The scan's temporary tree (`root`) is gone when this returns.
  auto scan = [&]() -> Result<std::unique_ptr<Namespace>> {
    ScanDir root;
    ParallelScanner scanner(backend, options, report);
    if (int listed = scanner.Run(&root, &root_node); listed < 0) {
      return Status::FromErrno(-listed, "cannot list SOURCE");
    }
    struct statvfs fs_stats {};
    if (backend->statfs(&fs_stats) < 0) fs_stats = {};
    return Build(root_node, &root, fs_stats,
                 std::min<uint64_t>(options.max_arena_bytes, UINT32_MAX));
  };
  Result<std::unique_ptr<Namespace>> ns = scan();
  // The scan's temporary trees were spread over the scan threads' malloc
  // arenas: hand the freed pages back, or they stay in the daemon's RSS.
  ::malloc_trim(0);
  return ns;
}

}  // namespace tierfs
