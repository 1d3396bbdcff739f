// FUSE passthrough (Linux 6.9+): a file opened in passthrough mode is read
// (and mmap()ed) by the kernel straight from a backing file the daemon
// registered on /dev/fuse, with no request to the daemon. tierfs passes
// through a file whose bytes are all in one tier file: a RAM tier's memory
// file (memfd: one per file, its chunks at their offsets), or a directory
// tier's tier file (data/f<seq>: one per file, its chunks at their offsets)
// once every chunk of the file is in it. Every other file is opened as
// before (page cache, keep_cache).
//
// It needs CAP_SYS_ADMIN (the kernel checks it when a backing file is
// registered), FUSE_PASSTHROUGH accepted in the INIT reply (libfuse 3.14
// cannot say it: InitReplyPatch adds it), and real OPEN replies: the
// zero-message open (ENOSYS) would stop every OPEN. The kernel refuses a
// passthrough open of an inode open in cached mode, or with another backing
// file: PassthroughOpens keeps one backing file per inode while it is open
// and answers cached while a cached open lasts. Its lock is held for the
// bookkeeping alone: an inode's first passthrough open pins, opens and
// registers its tier file outside it while later opens of that inode wait
// (a bounded wait: past it they are answered cached, and the first lets its
// backing file go). A backing file stays
// registered after the last close (a bounded LRU of idle ones) while its
// file stays whole in its tier, so a passthrough open of a file opened
// before costs the round trip alone: no file open, no ioctl.
#pragma once

#include <fuse_lowlevel.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fs/config/mount_modes.h"
#include "tiering/base/counter_visitor.h"
#include "tiering/base/mutex.h"

namespace tierfs {

// Whether this daemon may use passthrough: "" if it may try (the kernel's
// INIT decides the rest), else why not ("passthrough=off", no
// CAP_SYS_ADMIN, a kernel before 6.9).
std::string PassthroughUnavailable(PassthroughWant want);

// Where backing files come from (the tiers). Thread-safe.
class BackingFiles {
 public:
  virtual ~BackingFiles() = default;
  // If a tier holds all of file `ino` in one file: 0 with *token naming
  // that file, pinned (its bytes stay until Unpin); else -errno.
  virtual int Pin(fuse_ino_t ino, uint64_t* token) = 0;
  virtual void Unpin(fuse_ino_t ino, uint64_t token) = 0;
  // A new descriptor of the pinned file `token`, or -errno.
  virtual int Open(fuse_ino_t ino, uint64_t token) = 0;
};

// The kernel's table of backing files: the registration ioctls on the
// session's /dev/fuse. A test puts a double in its place. Thread-safe.
class BackingRegistry {
 public:
  virtual ~BackingRegistry() = default;
  // Registers the open descriptor `fd` (the caller closes it): the backing
  // id (> 0), or -errno.
  virtual int Open(int fd) = 0;
  // Lets go of backing `id`: 0, or -errno.
  virtual int Close(int32_t id) = 0;
};

// The passthrough state of one mount and its open files. Thread-safe.
class PassthroughOpens {
 public:
  // REQUIRES: before the session starts. `why_not` is
  // PassthroughUnavailable's answer.
  void Configure(PassthroughWant want, std::string why_not);
  // Where backing files come from. REQUIRES: before the session starts.
  void UseBackingFiles(BackingFiles* files) { files_ = files; }
  // How many registered backing files of closed files may be kept (the
  // least recently opened go first); 0 (the default): none.
  // REQUIRES: before the session starts.
  void KeepIdle(size_t max_idle) { max_idle_ = max_idle; }
  // Where backing files are registered in place of the session's /dev/fuse
  // (a test's double). REQUIRES: before the session starts.
  void UseRegistry(BackingRegistry* registry) { registry_ = registry; }
  // How long an open waits for another open of its inode to register the
  // backing file (kRegisteringWait unless a test says); past it, it is
  // answered cached. REQUIRES: before the session starts.
  void BoundRegisteringWait(std::chrono::milliseconds wait) { registering_wait_ = wait; }
  static constexpr std::chrono::milliseconds kRegisteringWait{1000};
  // Whether the INIT reply should ask for FUSE_PASSTHROUGH.
  bool wanted() const { return want_ != PassthroughWant::kOff && why_not_.empty(); }
  PassthroughWant want() const { return want_; }
  // At INIT: whether the kernel offered it (then the reply asks for it).
  // `dev_fd` is the session's /dev/fuse descriptor.
  void AtInit(bool offered, int dev_fd);
  bool active() const { return active_.load(std::memory_order_acquire); }
  // "" when active, else why not.
  std::string why_not() const;

  // A file `ino` is opened. Returns the backing id to reply with
  // FOPEN_PASSTHROUGH, or -errno: reply a cached open. Either way the open
  // is counted until Release. *first: the inode's first passthrough open
  // since it had none open.
  int Open(fuse_ino_t ino, bool* first);
  // A chunk of file `ino` left its tier: a backing file registered for it
  // is let go (at its last close if open). Cheap; called by the tiers.
  void Removed(fuse_ino_t ino);
  // An open answered in passthrough mode or not is released. Returns true
  // when it was the inode's last open without passthrough.
  bool Release(fuse_ino_t ino, bool passthrough);
  // Whether the mount's page cache may hold pages of `ino` (it was opened
  // without passthrough since the last call); the caller is to drop them.
  bool TakePaged(fuse_ino_t ino);
  // Where the RAM tier keeps its files: kHugeTmpfs (a tmpfs of the
  // daemon's own, huge pages) or kMemfd (as the node's shmem_enabled says).
  static constexpr const char* kHugeTmpfs = "tmpfs with huge pages";
  static constexpr const char* kMemfd = "memfd";
  // REQUIRES: before the session starts.
  void NoteMemoryFiles(std::string where) { memory_files_ = std::move(where); }
  // The page cache of a file was dropped: its bytes are held by the tier.
  void CountCacheDropped() { cache_drops_.fetch_add(1, std::memory_order_relaxed); }
  // A file of `bytes` was opened in passthrough mode (its reads are not seen).
  void CountOpened(uint64_t bytes) { opened_bytes_.fetch_add(bytes, std::memory_order_relaxed); }

  void VisitCounters(CounterVisitor& v) const;

 private:
  struct InodeOpens {
    uint32_t cached = 0;      // opens answered without passthrough, not released
    uint32_t passed = 0;      // opens answered with passthrough, not released
    int32_t backing_id = -1;  // registered while passed > 0, and idle after
    uint64_t token = 0;       // the backing file registered (pinned while passed > 0)
    bool removed = false;     // a chunk left the tier since: not kept idle
    bool idle = false;        // in idle_ (passed == 0, backing_id registered)
    // An open is pinning, opening and registering the backing file outside
    // mu_ (passed == 0; it holds the entry's former backing id meanwhile).
    bool registering = false;
    std::list<fuse_ino_t>::iterator idle_at;
  };
  using Opens = std::unordered_map<fuse_ino_t, InodeOpens>;
  // I/O decided under mu_ and done once it is released.
  struct Deferred {
    std::vector<int32_t> unregister;                     // backing ids
    std::vector<std::pair<fuse_ino_t, uint64_t>> unpin;  // inode, token
  };
  // What the open that registers an inode's backing file took from its
  // entry: the former registration, to reuse or let go.
  struct Former {
    int32_t backing_id = -1;
    uint64_t token = 0;
    bool removed = false;
  };
  // Registers `fd` (closed here) with the kernel: the backing id or -errno.
  int Register(int fd);
  void Unregister(int32_t id);
  // True if this open is to register the inode's backing file (*former
  // set), else false with *answer the open's answer as the inode's state
  // decides it (waiting while another open registers).
  bool Begin(fuse_ino_t ino, int* answer, Former* former, Deferred* later) EXCLUDES(mu_);
  // Outside mu_: the tier file pinned, opened and registered, or the former
  // registration reused (then taken from *former, as one let go is). The
  // backing id, or -errno (then unpinned).
  int Prepare(fuse_ino_t ino, Former* former, uint64_t* token);
  // The registering open's answer published: `id` from Prepare; a former
  // registration left (the file was not pinned) is idle again.
  int Publish(fuse_ino_t ino, int id, uint64_t token, const Former& former, bool* first,
              Deferred* later) EXCLUDES(mu_);
  // The registering open threw: its entry is let be.
  void Abandon(fuse_ino_t ino) EXCLUDES(mu_);
  // One open of `it` released (Release's work under mu_).
  bool Drop(Opens::iterator it, bool passthrough, Deferred* later) REQUIRES(mu_);
  // An answer without passthrough.
  int CachedOpen(fuse_ino_t ino, InodeOpens& e, int err) REQUIRES(mu_);
  // Lets go of an entry's registered backing file and forgets the entry
  // if nothing else holds it.
  void LetGo(Opens::iterator it, Deferred* later) REQUIRES(mu_);
  // An entry's registration with no open left: kept idle, or let go if a
  // chunk left its tier or none are kept.
  void Idle(Opens::iterator it, Deferred* later) REQUIRES(mu_);
  // Forgets the entry if nothing holds it.
  void ForgetUnused(Opens::iterator it) REQUIRES(mu_);
  // Applies the removals noted since the last call.
  void TakeRemovals(Deferred* later) REQUIRES(mu_);
  void DoDeferred(const Deferred& later) EXCLUDES(mu_);

  // The ioctls on the session's /dev/fuse.
  class FuseDevice final : public BackingRegistry {
   public:
    int Open(int fd) override;
    int Close(int32_t id) override;
    int dev_fd = -1;  // set at INIT
  };

  PassthroughWant want_ = PassthroughWant::kAuto;
  std::string why_not_;       // set before the session; "" = may try
  std::string memory_files_;  // set before the session
  std::atomic<bool> active_{false};
  std::atomic<bool> refused_{false};  // wanted, and the kernel did not offer it
  FuseDevice device_;
  BackingRegistry* registry_ = &device_;
  BackingFiles* files_ = nullptr;
  size_t max_idle_ = 0;
  std::chrono::milliseconds registering_wait_ = kRegisteringWait;
  // Guards opens_, idle_ and paged_. No I/O under it: files_ (and the
  // tiers' locks) and the registration ioctls are called after it is
  // released. Takes removed_mu_ under it.
  Mutex mu_ ACQUIRED_BEFORE(removed_mu_);
  CondVar registered_;  // an entry's registering ended (under mu_)
  Opens opens_ GUARDED_BY(mu_);
  std::list<fuse_ino_t> idle_
      GUARDED_BY(mu_);  // inodes with a registered backing file and no open; newest first
  Mutex removed_mu_;    // guards removed_; a leaf lock
  std::vector<fuse_ino_t> removed_ GUARDED_BY(removed_mu_);
  std::atomic<bool> any_removed_{false};
  // Files opened without passthrough whose pages have not been dropped
  // since: the files read before they were resident, and those that never
  // are (no room). Bounded: beyond kMaxPaged, a file's pages are left to
  // the kernel's reclaim.
  static constexpr size_t kMaxPaged = 1 << 16;
  std::unordered_set<fuse_ino_t> paged_ GUARDED_BY(mu_);
  std::atomic<uint64_t> cache_drops_{0}, cached_now_{0}, opened_bytes_{0}, passed_opens_{0},
      cached_opens_{0}, busy_{0}, slow_registrations_{0}, register_failed_{0}, backing_files_{0},
      registrations_{0}, reused_{0};
};

}  // namespace tierfs
