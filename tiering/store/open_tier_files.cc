#include "tiering/store/open_tier_files.h"

#include <fcntl.h>
#include <sys/resource.h>

#include <algorithm>

namespace tierfs::directory_tier {

int OpenTierFiles::Get(uint64_t seq, const std::string& path, std::shared_ptr<LocalFile>* out) {
  uint64_t forgets;
  {
    MutexLock lock(mu_);
    auto it = index_.find(seq);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      *out = it->second->second;
      return 0;
    }
    forgets = forgets_;
  }
  std::unique_ptr<LocalFile> file;
  if (int err = io_->open(path, O_RDONLY | O_NOFOLLOW, 0, &file); err < 0) return err;
  std::shared_ptr<LocalFile> opened(std::move(file));
  *out = opened;
  std::shared_ptr<LocalFile> evicted;  // closed after the lock is released
  MutexLock lock(mu_);
  // A Forget since the lookup may be of this file, unlinked after the open:
  // kept, it would hold the file's blocks. Another reader may have kept one.
  if (forgets_ != forgets || index_.count(seq) > 0 || capacity_ == 0) return 0;
  lru_.emplace_front(seq, std::move(opened));
  index_[seq] = lru_.begin();
  if (lru_.size() > capacity_) {
    evicted = std::move(lru_.back().second);
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return 0;
}

void OpenTierFiles::Forget(uint64_t seq) {
  std::shared_ptr<LocalFile> gone;  // closed after the lock is released
  MutexLock lock(mu_);
  ++forgets_;
  auto it = index_.find(seq);
  if (it == index_.end()) return;
  gone = std::move(it->second->second);
  lru_.erase(it->second);
  index_.erase(it);
}

void OpenTierFiles::ForgetAll() {
  Lru gone;  // closed after the lock is released
  MutexLock lock(mu_);
  ++forgets_;
  gone.swap(lru_);
  index_.clear();
}

size_t OpenTierFiles::size() const {
  MutexLock lock(mu_);
  return lru_.size();
}

size_t TierFilesKeptOpen() {
  struct rlimit rl {};
  const uint64_t limit = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
  return static_cast<size_t>(std::clamp<uint64_t>(limit / 32, 16, 256));
}

}  // namespace tierfs::directory_tier
