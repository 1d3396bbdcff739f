#include "tiering/namespace.h"

#include <algorithm>

namespace tierfs {

std::string_view Namespace::name(NodeId id) const {
  const Node& n = nodes_[id];
  return std::string_view(arena_).substr(n.name_off, n.name_len);
}

std::string_view Namespace::link_target(NodeId id) const {
  const Node& n = nodes_[id];
  return std::string_view(arena_).substr(n.first_child, n.child_count);
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

size_t Namespace::memory_bytes() const {
  return nodes_.capacity() * sizeof(Node) + arena_.capacity();
}

void Namespace::VisitCounters(CounterVisitor& v) const {
  v.Gauge("files", static_cast<double>(file_count()));
  v.Gauge("directories", static_cast<double>(dir_count()));
  v.Gauge("symlinks", static_cast<double>(symlink_count()));
  v.Gauge("skipped", static_cast<double>(skipped_count()));
  v.Gauge("file_bytes", static_cast<double>(total_file_bytes()));
  v.Gauge("memory_bytes", static_cast<double>(memory_bytes()));
}

}  // namespace tierfs
