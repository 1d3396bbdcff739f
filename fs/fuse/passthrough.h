// FUSE passthrough (Linux 6.9+): a file opened in passthrough mode is read
// (and mmap()ed) by the kernel straight from a backing file the daemon
// registered on /dev/fuse, with no request to the daemon. tierfs passes
// through a file whose bytes are all in one tier file: a directory tier's
// chunk file, or a RAM tier's memory file (memfd), when the file is one
// chunk. Every other file is opened as before (page cache, keep_cache).
//
// It needs CAP_SYS_ADMIN (the kernel checks it when a backing file is
// registered), FUSE_PASSTHROUGH accepted in the INIT reply (libfuse 3.14
// cannot say it: InitReplyPatch adds it), and real OPEN replies: the
// zero-message open (ENOSYS) would stop every OPEN. The kernel refuses a
// passthrough open of an inode open in cached mode, or with another backing
// file: PassthroughOpens keeps one backing file per inode while it is open
// and answers cached while a cached open lasts.
#pragma once

#include <fuse_lowlevel.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "fs/config/mount_modes.h"
#include "tiering/base/counter_visitor.h"

namespace tierfs {

// Whether this daemon may use passthrough: "" if it may try (the kernel's
// INIT decides the rest), else why not ("passthrough=off", no
// CAP_SYS_ADMIN, a kernel before 6.9).
std::string PassthroughUnavailable(PassthroughWant want);

// The passthrough state of one mount and its open files. Thread-safe.
class PassthroughOpens {
 public:
  // REQUIRES: before the session starts. `why_not` is
  // PassthroughUnavailable's answer.
  void Configure(PassthroughWant want, std::string why_not);
  // Whether the INIT reply should ask for FUSE_PASSTHROUGH.
  bool wanted() const { return want_ != PassthroughWant::kOff && why_not_.empty(); }
  PassthroughWant want() const { return want_; }
  // At INIT: whether the kernel offered it (then the reply asks for it).
  // `dev_fd` is the session's /dev/fuse descriptor.
  void AtInit(bool offered, int dev_fd);
  bool active() const { return active_.load(std::memory_order_acquire); }
  // "" when active, else why not.
  std::string why_not() const;

  // A file `ino` is opened: `open_backing` returns a descriptor of its
  // backing file or -errno (none). Returns the backing id to reply with
  // FOPEN_PASSTHROUGH, or -errno: reply a cached open. Either way the open
  // is counted until Release.
  // *registered: a backing file was registered for the inode (its first
  // passthrough open since it had none).
  int Open(fuse_ino_t ino, const std::function<int()>& open_backing, bool* registered);
  // An open answered in passthrough mode or not is released. Returns true
  // when it was the inode's last open without passthrough.
  bool Release(fuse_ino_t ino, bool passthrough);
  // Whether the mount's page cache may hold pages of `ino` (it was opened
  // without passthrough since the last call); the caller is to drop them.
  bool TakePaged(fuse_ino_t ino);
  // The page cache of a file was dropped: its bytes are held by the tier.
  void CountCacheDropped() { cache_drops_.fetch_add(1, std::memory_order_relaxed); }
  // A file of `bytes` was opened in passthrough mode (its reads are not seen).
  void CountOpened(uint64_t bytes) { opened_bytes_.fetch_add(bytes, std::memory_order_relaxed); }

  void VisitCounters(CounterVisitor& v) const;

 private:
  struct InodeOpens {
    uint32_t cached = 0;      // opens answered without passthrough, not released
    uint32_t passed = 0;      // opens answered with passthrough, not released
    int32_t backing_id = -1;  // registered while passed > 0
  };
  // Registers `fd` (closed here) with the kernel: the backing id or -errno.
  int Register(int fd);
  void Unregister(int32_t id);

  PassthroughWant want_ = PassthroughWant::kAuto;
  std::string why_not_;  // set before the session; "" = may try
  std::atomic<bool> active_{false};
  std::atomic<bool> refused_{false};  // wanted, and the kernel did not offer it
  int dev_fd_ = -1;
  std::mutex mu_;  // guards opens_ and paged_; a leaf lock (the registration ioctls run under it)
  std::unordered_map<fuse_ino_t, InodeOpens> opens_;
  // Files opened without passthrough whose pages have not been dropped
  // since: the files read before they were resident, and those that never
  // are (no room). Bounded: beyond kMaxPaged, a file's pages are left to
  // the kernel's reclaim.
  static constexpr size_t kMaxPaged = 1 << 16;
  std::unordered_set<fuse_ino_t> paged_;
  std::atomic<uint64_t> cache_drops_{0}, cached_now_{0}, opened_bytes_{0}, passed_opens_{0},
      cached_opens_{0}, busy_{0}, register_failed_{0}, backing_files_{0};
};

}  // namespace tierfs
