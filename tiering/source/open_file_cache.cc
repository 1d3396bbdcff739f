#include "tiering/source/open_file_cache.h"

#include <algorithm>
#include <cerrno>

#include "tiering/base/log.h"
#include "tiering/namespace/namespace_freshness.h"

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
    MutexLock lock(shard.mu);
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
  if ((err = CheckIdentity(id, file.get())) < 0) return err;
  std::shared_ptr<SourceFile> opened(std::move(file));
  std::shared_ptr<SourceFile> evicted;  // closed after the lock is released
  MutexLock lock(shard.mu);
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

int OpenFileCache::CheckIdentity(NodeId id, SourceFile* file) {
  struct stat st;
  if (int err = file->fstat(&st); err < 0) return err;
  const char* what = IdentityChange(ns_->node(id), st);  // n.ino 0: inodes not stable
  if (what == nullptr) return 0;
  // Serving it would mix versions (its size is the snapshot's, tier chunks
  // may hold the old bytes): EIO until a remount takes a new snapshot.
  const uint64_t count = changed_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (count <= 16 || (count & (count - 1)) == 0) {  // the first ones, then at powers of two
    TIERFS_LOG(kWarning,
               "SOURCE file '{}' {} since the mount's snapshot: its reads fail with EIO until "
               "a remount ({} such opens so far)",
               ns_->Path(id), what, count);
  }
  return -EIO;
}

size_t OpenFileCache::open_files() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    MutexLock lock(s.mu);
    n += s.lru.size();
  }
  return n;
}

void OpenFileCache::VisitCounters(CounterVisitor& v) const {
  v.Gauge("open", static_cast<double>(open_files()),
          {"SOURCE files held open now.", Unit::kFiles, "held"});
  v.Gauge("capacity", static_cast<double>(capacity()),
          {"Most SOURCE files held open at once.", Unit::kFiles});
  v.Counter("hits", hits(), {"Reads that found their SOURCE file already open."});
  v.Counter("misses", misses(), {"Reads that had to open their SOURCE file."});
  v.Counter("evictions", evictions(), {"SOURCE files closed to make room for others."});
  v.Counter("changed", changed(),
            {"Opens refused because the SOURCE file changed since the namespace scan."});
}

}  // namespace tierfs
