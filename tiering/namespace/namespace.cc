#include "tiering/namespace/namespace.h"

#include <fmt/format.h>

#include <algorithm>

namespace tierfs {

Namespace::Namespace(std::span<const Node> nodes, std::string_view arena,
                     const NamespaceTotals& totals, const struct statvfs& fs_stats,
                     std::shared_ptr<const void> keep_alive)
    : nodes_(nodes),
      arena_(arena),
      totals_(totals),
      fs_stats_(fs_stats),
      keep_alive_(std::move(keep_alive)) {}

std::string_view Namespace::name(NodeId id) const {
  const Node& n = nodes_[id];
  return arena_.substr(n.name_off, n.name_len);
}

std::string_view Namespace::link_target(NodeId id) const {
  const Node& n = nodes_[id];
  return arena_.substr(n.first_child, n.child_count);
}

std::pair<NodeId, NodeId> Namespace::Children(NodeId dir) const {
  const Node& n = nodes_[dir];
  if (!S_ISDIR(n.mode)) return {0, 0};
  return {n.first_child, n.first_child + n.child_count};
}

std::optional<NodeId> Namespace::Lookup(NodeId dir, std::string_view wanted) const {
  auto [begin, end] = Children(dir);
  NodeId lo = begin, hi = end;
  while (lo < hi) {
    NodeId mid = lo + (hi - lo) / 2;
    std::string_view n = name(mid);
    if (n == wanted) return mid;
    if (n < wanted) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return std::nullopt;
}

std::string Namespace::Path(NodeId id) const {
  std::vector<NodeId> chain;
  for (NodeId at = id; at != kRootNode; at = nodes_[at].parent) chain.push_back(at);
  std::string path;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (!path.empty()) path += '/';
    path += name(*it);
  }
  return path;
}

std::optional<NodeId> Namespace::Resolve(std::string_view rel) const {
  NodeId at = kRootNode;
  while (!rel.empty()) {
    size_t slash = rel.find('/');
    std::string_view part = rel.substr(0, slash);
    rel = slash == std::string_view::npos ? std::string_view() : rel.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") return std::nullopt;  // callers must not escape or climb
    auto next = Lookup(at, part);
    if (!next) return std::nullopt;
    at = *next;
  }
  return at;
}

void Namespace::Fill(NodeId id, uint64_t ino_base, struct stat* st) const {
  const Node& n = nodes_[id];
  *st = {};
  st->st_ino = id + ino_base;
  st->st_mode = n.mode;
  st->st_nlink = n.nlink;
  st->st_uid = n.uid;
  st->st_gid = n.gid;
  st->st_size = static_cast<off_t>(n.size);
  st->st_blocks = static_cast<blkcnt_t>(n.blocks);
  st->st_blksize = 4096;
  auto set = [](struct timespec* ts, int64_t ns) {
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
    if (ts->tv_nsec < 0) {  // times before 1970
      ts->tv_nsec += 1000000000;
      ts->tv_sec -= 1;
    }
  };
  set(&st->st_atim, n.atime_ns);
  set(&st->st_mtim, n.mtime_ns);
  set(&st->st_ctim, n.ctime_ns);
}

size_t Namespace::memory_bytes() const { return nodes_.size() * sizeof(Node) + arena_.size(); }

Status CheckLayout(std::span<const Node> nodes, std::string_view arena,
                   const NamespaceTotals& totals) {
  auto corrupt = [](std::string what) { return Status::Error(EUCLEAN, std::move(what)); };
  if (nodes.empty()) return corrupt("no root node");
  if (nodes.size() > UINT32_MAX) return corrupt("more nodes than node ids");
  if (!S_ISDIR(nodes[0].mode)) return corrupt("the root is not a directory");
  if (nodes[0].name_len != 0) return corrupt("the root has a name");
  auto in_arena = [&](uint64_t off, uint64_t len) { return off + len <= arena.size(); };
  NamespaceTotals seen;
  uint64_t next_child = 1;  // breadth-first: children ranges follow each other
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    auto bad = [&](std::string_view what) { return corrupt(fmt::format("node {}: {}", id, what)); };
    if (!in_arena(n.name_off, n.name_len)) return bad("its name lies outside the name arena");
    std::string_view name = arena.substr(n.name_off, n.name_len);
    if (id != 0) {
      if (n.parent >= id) return bad("its parent does not come before it");
      const Node& p = nodes[n.parent];
      if (!S_ISDIR(p.mode) || id < p.first_child || id - p.first_child >= p.child_count) {
        return bad("its parent does not list it");
      }
      if (name.empty() || name == "." || name == ".." ||
          name.find_first_of(std::string_view("/\0", 2)) != std::string_view::npos) {
        return bad("its name is not a file name");
      }
      if (id > p.first_child) {
        const Node& prev = nodes[id - 1];
        if (!(arena.substr(prev.name_off, prev.name_len) < name)) {
          return bad("its siblings are not sorted by name");
        }
      }
    }
    if (S_ISDIR(n.mode)) {
      seen.dirs++;
      if (n.first_child != next_child || next_child + n.child_count > nodes.size()) {
        return bad("its children are not the next range of nodes");
      }
      next_child += n.child_count;
    } else if (S_ISLNK(n.mode)) {
      seen.symlinks++;
      if (!in_arena(n.first_child, n.child_count)) return bad("its target lies outside the arena");
    } else if (S_ISREG(n.mode)) {
      seen.files++;
      if (n.first_child != 0 || n.child_count != 0) return bad("a file with children");
      if (n.size > (uint64_t{1} << 62)) return bad("an impossible file size");
      seen.file_bytes += n.size;
    } else {
      return bad("neither a file, a directory nor a symlink");
    }
  }
  if (next_child != nodes.size()) return corrupt("some nodes belong to no directory");
  if (seen.files != totals.files || seen.dirs != totals.dirs || seen.symlinks != totals.symlinks ||
      seen.file_bytes != totals.file_bytes) {
    return corrupt("the totals do not match the nodes");
  }
  return Status::Ok();
}

void Namespace::VisitCounters(CounterVisitor& v) const {
  v.Gauge("files", static_cast<double>(file_count()), {"Regular files in the namespace."});
  v.Gauge("directories", static_cast<double>(dir_count()), {"Directories in the namespace."});
  v.Gauge("symlinks", static_cast<double>(symlink_count()), {"Symbolic links in the namespace."});
  v.Gauge("skipped", static_cast<double>(skipped_count()),
          {"SOURCE entries not served as they are: special files (left out) and directories "
           "that could not be listed (shown empty).",
           Unit::kEntries});
  v.Gauge("file_bytes", static_cast<double>(total_file_bytes()),
          {"Total size of the namespace's regular files.", Unit::kBytes});
  v.Gauge("memory_bytes", static_cast<double>(memory_bytes()),
          {"Memory the namespace snapshot takes.", Unit::kBytes});
  v.Gauge("mapped_index", mapped_ ? 1 : 0,
          {"1 if the namespace snapshot is a mapped index file, 0 if built in memory."});
}

}  // namespace tierfs
