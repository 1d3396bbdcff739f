// OpenTierFiles: a directory tier's files kept open for reading, so that a
// read of a chunk costs one pread, not an open, a pread and a close. Bounded:
// at most `capacity` descriptors, the least recently used closed first. Each
// is handed out as a shared_ptr, so a reader's pread never races the close:
// an evicted or forgotten file closes when its last reader is done. Keyed by
// the tier file's seq, which no other tier file takes while the tier lives.
// Internal to tiering/store (journaled_directory_tier.h).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "tiering/base/mutex.h"
#include "tiering/io/file_io.h"

namespace tierfs::directory_tier {

class OpenTierFiles {
 public:
  // `io` must outlive it. A capacity of 0 keeps nothing open.
  OpenTierFiles(FileIo* io, size_t capacity) : io_(io), capacity_(capacity) {}
  OpenTierFiles(const OpenTierFiles&) = delete;
  OpenTierFiles& operator=(const OpenTierFiles&) = delete;

  // The read-only open file of tier file `seq` at `path`, opened through the
  // FileIo on a miss (outside the lock). 0 or the open's -errno (-ENOENT once
  // the file is unlinked); nothing is kept of a failed open. A file opened
  // while a Forget ran is handed out but not kept: it may be the one being
  // forgotten. Thread-safe.
  int Get(uint64_t seq, const std::string& path, std::shared_ptr<LocalFile>* out);
  // Tier file `seq` was unlinked: its descriptor leaves the cache now, and
  // is closed once its last reader is done. REQUIRES: called after the
  // unlink, so that a Get opening the file afterwards finds it gone.
  void Forget(uint64_t seq);
  // Forgets every file (the tier's files were all deleted).
  void ForgetAll();

  size_t capacity() const { return capacity_; }
  size_t size() const;

 private:
  using Lru = std::list<std::pair<uint64_t, std::shared_ptr<LocalFile>>>;  // front: most recent

  FileIo* const io_;
  const size_t capacity_;
  // Guards lru_, index_ and forgets_. A leaf: nothing is locked under it,
  // and it is never held across I/O (a file is opened before it is taken,
  // and closed after it is released).
  mutable Mutex mu_;
  Lru lru_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, Lru::iterator> index_ GUARDED_BY(mu_);
  uint64_t forgets_ GUARDED_BY(mu_) = 0;  // Forget calls so far: a Get's open raced one if it moved
};

// How many tier files a directory tier keeps open for reading: the files
// being read at once on a node (8 ranks of up to 16 loader workers, each
// reading one file at a time) with room to spare, 256, but at most 1/32 of
// the open-file limit (RLIMIT_NOFILE as it is now: the daemon raises it
// before it opens its tiers), at least 16.
size_t TierFilesKeptOpen();

}  // namespace tierfs::directory_tier
