// OpenFileCache: keeps SOURCE files open between reads, so a read costs the
// PFS one read, not an open + read + close. Bounded: at most `capacity` files
// are open (keep it below RLIMIT_NOFILE); the least recently used is closed
// once its last reader is done.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/mutex.h"
#include "tiering/io/backend.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {

class OpenFileCache {
 public:
  // `backend` and `ns` must outlive the cache.
  OpenFileCache(Backend* backend, const Namespace* ns, size_t capacity);

  // The open file of regular-file node `id`, opened on a miss. A file that
  // is not the one the snapshot describes (another inode, size, mtime or
  // ctime: replaced or modified since the scan) is -EIO, counted in
  // changed(), never served. Returns 0 or -errno. Thread-safe.
  int Get(NodeId id, std::shared_ptr<SourceFile>* out);

  size_t capacity() const { return capacity_; }
  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }
  uint64_t changed() const { return changed_.load(std::memory_order_relaxed); }
  size_t open_files() const;
  void VisitCounters(CounterVisitor& v) const;

 private:
  struct Shard {
    mutable Mutex mu;  // guards lru and index; a leaf lock, never held across I/O
    std::list<std::pair<NodeId, std::shared_ptr<SourceFile>>> lru
        GUARDED_BY(mu);  // front = most recent
    std::unordered_map<NodeId, decltype(lru)::iterator> index GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 16;

  Shard& ShardOf(NodeId id) { return shards_[id % kShards]; }
  // 0 if `file` is the file the snapshot's node `id` describes, else -EIO.
  int CheckIdentity(NodeId id, SourceFile* file);

  Backend* const backend_;
  const Namespace* const ns_;
  const size_t capacity_;
  const size_t per_shard_;
  std::vector<Shard> shards_;
  std::atomic<uint64_t> hits_{0}, misses_{0}, evictions_{0}, changed_{0};
};

}  // namespace tierfs
