// The read path: zero-message open, then reads served from memory (control
// files) or through the ReadPath (tiers, then SOURCE).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "fs/handler.h"
#include "tiering/base/aligned_buffer.h"

namespace tierfs {

// Zero-message open: answering ENOSYS makes the kernel stop sending OPEN and
// RELEASE (and OPENDIR/RELEASEDIR) for the rest of the mount, and keep each
// file's page cache across opens (FOPEN_KEEP_CACHE is the no-open default).
// With check_access (a mount made by mount.fuse3 -o drop_privileges), every
// open asks the daemon, which checks the caller's permissions; with source
// permissions (a root daemon with allow_other), every open is also asked of
// SOURCE as the caller.
void OpOpen(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  FsContext& c = Ctx(req);
  if (!c.check_access() && c.source_permissions() == nullptr) {
    return (void)fuse_reply_err(req, ENOSYS);  // not an error
  }
  Guarded(req, "open", [&] {
    FsContext& ctx = Ctx(req);
    if (ctx.IsNode(ino)) {
      const bool read_only = (fi->flags & O_ACCMODE) == O_RDONLY;
      if (!read_only) return ReplyError(req, EROFS);  // the mirror is read-only
      const NodeId id = FsContext::NodeOf(ino);
      if (ctx.check_access() && !ctx.MayAccess(req, id, R_OK)) return ReplyError(req, EACCES);
      if (SourcePermissions* perms = ctx.source_permissions()) {
        const fuse_ctx* caller = fuse_req_ctx(req);
        if (caller->uid != 0) {
          AccessCaller who{caller->uid, caller->gid, {}};
          gid_t groups[256];
          int n = fuse_req_getgroups(req, 256, groups);
          if (n > 0) who.groups.assign(groups, groups + std::min(n, 256));
          if (int err = perms->Check(who, id, R_OK); err != 0) return ReplyError(req, -err);
        }
      }
    }
    fi->keep_cache = 1;
    fuse_reply_open(req, fi);
  });
}

void OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info*) {
  Guarded(req, "read", [&] {
    FsContext& ctx = Ctx(req);
    if (off < 0) return ReplyError(req, EINVAL);
    if (ctx.control().Owns(ino)) {
      std::string_view data;
      std::shared_ptr<const std::string> hold;
      if (int err = ctx.control().Read(ino, static_cast<uint64_t>(off), size, &data, &hold)) {
        return ReplyError(req, -err);
      }
      return (void)fuse_reply_buf(req, data.data(), data.size());
    }
    ctx.requests().read.fetch_add(1, std::memory_order_relaxed);  // data reads only
    if (!ctx.IsNode(ino)) return ReplyError(req, ENOENT);
    NodeId id = FsContext::NodeOf(ino);
    if (!S_ISREG(ctx.ns().node(id).mode)) return ReplyError(req, EISDIR);
    const auto start = std::chrono::steady_clock::now();
    // One page-aligned buffer per worker thread: no allocation per read once warm.
    thread_local AlignedBuffer buf;
    TierRead data;  // in buf, or in tier memory held until the reply is sent
    ssize_t n = ctx.read_path().Read(id, static_cast<uint64_t>(off), size, buf.Get(size), &data);
    if (n < 0) return ReplyError(req, static_cast<int>(-n));
    ctx.requests().read_bytes.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    // Recorded before the reply: once the reader has its bytes it may look
    // at the counters, and this read must already be in them.
    ctx.requests().read_latency.Record(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                  std::chrono::steady_clock::now() - start)
                                  .count()));
    fuse_reply_buf(req, data.data, static_cast<size_t>(n));
  });
}

}  // namespace tierfs
