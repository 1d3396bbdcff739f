#include "tiering/open_file_cache.h"

#include <algorithm>

namespace tierfs {

OpenFileCache::OpenFileCache(Backend* backend, const Namespace* ns, size_t capacity)
    : backend_(backend),
      ns_(ns),
      capacity_(std::max(capacity, kShards) / kShards * kShards),  // a whole number per shard
      per_shard_(capacity_ / kShards),
      shards_(kShards) {}

int OpenFileCache::Get(NodeId id, std::shared_ptr<SourceFile>* out) {
  Shard& shard = ShardOf(id);
  {
    std::lock_guard lock(shard.mu);
    auto it = shard.index.find(id);
    if (it != shard.index.end()) {
      shard.lru.splice(shard.lru.begin(), shard.lru, it->second);
      *out = it->second->second;
      hits_.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
  }
  // Open without the lock: a PFS open can take milliseconds.
  misses_.fetch_add(1, std::memory_order_relaxed);
  std::unique_ptr<SourceFile> file;
  int err = backend_->open(ns_->Path(id), &file);
  if (err < 0) return err;
  std::shared_ptr<SourceFile> opened(std::move(file));
  std::shared_ptr<SourceFile> evicted;  // closed after the lock is released
  std::lock_guard lock(shard.mu);
  auto it = shard.index.find(id);
  if (it != shard.index.end()) {  // another reader opened it meanwhile: share theirs
    *out = it->second->second;
    return 0;
  }
  shard.lru.emplace_front(id, opened);
  shard.index[id] = shard.lru.begin();
  if (shard.lru.size() > per_shard_) {
    evicted = std::move(shard.lru.back().second);
    shard.index.erase(shard.lru.back().first);
    shard.lru.pop_back();
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
  *out = std::move(opened);
  return 0;
}

size_t OpenFileCache::open_files() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    n += s.lru.size();
  }
  return n;
}

void OpenFileCache::VisitCounters(CounterVisitor& v) const {
  v.Gauge("open", static_cast<double>(open_files()));
  v.Gauge("capacity", static_cast<double>(capacity()));
  v.Counter("hits", hits());
  v.Counter("misses", misses());
  v.Counter("evictions", evictions());
}

}  // namespace tierfs
