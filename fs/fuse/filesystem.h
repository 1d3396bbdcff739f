// The FUSE adapter: turns low-level kernel requests into calls on the
// namespace snapshot and the read path, and replies. Thin by design: all
// policy lives in tiering/ and prefetch/.
//
// Inode numbers: node id + 1 (the root node 0 is FUSE_ROOT_ID 1); numbers
// above the namespace belong to the control directory.
#pragma once

#include <fuse_lowlevel.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "fs/config/mount_modes.h"
#include "fs/fuse/caller_access.h"
#include "fs/fuse/control.h"
#include "fs/fuse/parallel_dirops.h"
#include "fs/fuse/passthrough.h"
#include "fs/fuse/passthrough_backing.h"
#include "fs/fuse/reads_by_uid.h"
#include "fs/fuse/source_permissions.h"
#include "prefetch/assembly/engine.h"
#include "tiering/base/latency_histogram.h"
#include "tiering/io/counting_backend.h"
#include "tiering/namespace/namespace.h"
#include "tiering/source/source_reader.h"

namespace tierfs {

// Requests the kernel sent us, by kind.
struct RequestCounters {
  std::atomic<uint64_t> lookup{0}, getattr{0}, readdir{0}, readlink{0}, read{0}, read_bytes{0},
      statfs{0}, xattr{0}, rejected_writes{0}, errors{0};
  LatencyHistogram read_latency;  // data reads, request to reply
  ReadsByUid by_uid;              // data reads that returned bytes, by caller
  // Steady clock (ns) of the last request for the dataset (not for the
  // control directory, not statfs), to 100 ms: idle_exit's clock.
  std::atomic<int64_t> last_use_ns{0};
  // Notes a request for the dataset now. Cheap: the shared line is written
  // at most every 100 ms.
  void NoteUse() {
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    if (now - last_use_ns.load(std::memory_order_relaxed) >= 100'000'000) {
      last_use_ns.store(now, std::memory_order_relaxed);
    }
  }
  void VisitCounters(CounterVisitor& v) const;
};

struct FsTimeouts {
  double entry = 86400;
  double attr = 86400;
};

// What a mount's handlers are made of, given once: none of it changes
// while the session runs. Pointers outlive the FsContext.
struct FsParts {
  const Namespace* ns = nullptr;
  SourceReader* reader = nullptr;
  Engine* engine = nullptr;
  const SourceCounters* source = nullptr;
  FsTimeouts timeouts;
  // The control files belong to `owner` and `group`; with `anyone_hints`
  // every user may write order and stage (each write acts as its writer).
  uid_t owner = 0;
  gid_t group = 0;
  bool anyone_hints = false;
  ReaddirMode readdir = ReaddirMode::kPlus;  // read by the init handler
  // Whether the daemon checks permissions itself at open. On for a mount
  // the daemon did not make (mount.fuse3 -o drop_privileges hands over
  // /dev/fd/N): the kernel checks nothing unless the fstab line said
  // default_permissions, so open and opendir are answered (no zero-message
  // open) after a check of the file and every directory above it.
  bool check_access = false;
  // Set: every open and opendir is answered (no zero-message open) after
  // SOURCE, asked as the caller, allows it (fs/fuse/source_permissions.h);
  // so are the paths written to the control files. Null: the snapshot's
  // mode bits decide.
  SourcePermissions* source_permissions = nullptr;
  // SOURCE, for .tierfs/changes (the snapshot compared with SOURCE now,
  // `changes_threads` stats in flight; 0: kValidateThreads). Null: the
  // file says {"error":...}.
  Backend* changes_backend = nullptr;
  unsigned changes_threads = 0;
  // The text of .tierfs/stats as a reader sees it (the mount's figures,
  // fs/mount/mount_stats.h). Unset: the file says {"error":...}.
  std::function<std::string(uid_t reader)> stats;
};

// Everything the handlers need. Owned by the mount session; outlives the loop.
class FsContext {
 public:
  // The writers of the store's order and stage files may name what they
  // could open through the mount (CallerAccess), from now until destroyed.
  explicit FsContext(FsParts parts);
  ~FsContext();
  FsContext(const FsContext&) = delete;
  FsContext& operator=(const FsContext&) = delete;

  const Namespace& ns() const { return *ns_; }
  ReadPath& read_path() { return engine_->read_path(); }
  const SourceCounters& source() const { return *source_counters_; }
  const FsTimeouts& timeouts() const { return timeouts_; }
  RequestCounters& requests() { return requests_; }
  const RequestCounters& requests() const { return requests_; }
  ControlDir& control() { return control_; }
  ReaddirMode readdir_mode() const { return parts_.readdir; }
  bool check_access() const { return parts_.check_access; }
  SourcePermissions* source_permissions() const { return parts_.source_permissions; }
  // The INIT exchange, for InstallReplyPatch<FsContext>.
  InitReplyPatch& init_patch() { return init_patch_; }
  // FUSE passthrough: its state and the files open in it.
  PassthroughOpens& passthrough() { return passthrough_; }
  // The session (for notifications) and its /dev/fuse descriptor (backing
  // files are registered on it): made with this context as its userdata,
  // so set after. REQUIRES: set before the session starts.
  void set_session(fuse_session* se) {
    session_ = se;
    device_fd_ = fuse_session_fd(se);
  }
  fuse_session* session() const { return session_; }
  int device_fd() const { return device_fd_; }
  // Whether one tier file holds all of regular file `id`'s bytes at their
  // own offsets (its next opens pass through).
  bool InOneTierFile(NodeId id);
  // A file opened in passthrough mode will be read without the daemon
  // hearing of it: counted, and the read path told (ReadPath::NoteReadElsewhere).
  void NotePassthroughOpen(NodeId id);
  // Whether the process behind `req` may access node `id` with `mask`
  // (R_OK, W_OK, X_OK) and search every directory above it, by the
  // snapshot's mode bits.
  bool MayAccess(fuse_req_t req, NodeId id, int mask) const;

  bool IsNode(fuse_ino_t ino) const { return ino >= 1 && ino <= ns_->size(); }
  static NodeId NodeOf(fuse_ino_t ino) { return static_cast<NodeId>(ino - 1); }
  static fuse_ino_t InoOf(NodeId id) { return static_cast<fuse_ino_t>(id) + 1; }

  // The adapter's figures of its session: what the kernel negotiated, the
  // control files' snapshots, passthrough (MountStats walks the rest).
  void VisitSession(CounterVisitor& v) const;
  // The "you" group: `reader`'s own data reads, and nobody else's.
  void VisitReader(CounterVisitor& v, uid_t reader) const;

 private:
  std::vector<ControlFile> ControlFiles(bool anyone_hints);
  // The text of .tierfs/changes: CheckFreshness now, one check at a time
  // (another caller meanwhile gets {"error":"busy"} at once), the first
  // changed paths logged.
  std::string ChangesJson();

  const FsParts parts_;
  const Namespace* const ns_;
  SourceReader* const reader_;
  Engine* const engine_;
  const SourceCounters* const source_counters_;
  const FsTimeouts timeouts_;
  RequestCounters requests_;
  CallerAccess access_;  // before control_: its files' writers are checked with it
  ControlDir control_;
  std::atomic<bool> checking_{false};  // a .tierfs/changes check runs
  InitReplyPatch init_patch_;
  TierBackingFiles backing_;
  PassthroughOpens passthrough_;
  fuse_session* session_ = nullptr;
  int device_fd_ = -1;
};

// The process behind `req` as SOURCE would see it: uid, gid and all its
// supplementary groups (none when they cannot be read: the process is gone).
AccessCaller CallerOf(fuse_req_t req);

// The handler table. Userdata passed to fuse_session_new must be an FsContext*.
const fuse_lowlevel_ops& TierFsOps();

}  // namespace tierfs
