// Opens. Without a reason to answer them (the default of a user's daemon),
// the zero-message open: answering ENOSYS makes the kernel stop sending OPEN
// and RELEASE (and OPENDIR/RELEASEDIR) for the rest of the mount, and keep
// each file's page cache across opens (FOPEN_KEEP_CACHE is the no-open
// default). Opens are answered when the daemon checks the caller's
// permissions (check_access: a mount made by mount.fuse3 -o
// drop_privileges; source permissions: a root daemon with allow_other),
// and, for files, when passthrough is active: a file wholly in one tier
// file is then opened in passthrough mode (the kernel reads that file, the
// daemon never hears of the reads), every other file as before.
//
// The trade-off: with passthrough every open of a file costs one round trip
// (and its close a RELEASE, answered without waiting), where the
// zero-message open cost none; in exchange a resident file's reads and
// mmap run at the speed of the tier's file, and its bytes are held once in
// memory. Directories keep the zero-message opendir.
#include <fcntl.h>

#include "fs/fuse/handler.h"

namespace tierfs {
namespace {

// fi->fh of an answered open: what Release must undo.
constexpr uint64_t kFhUntracked = 0;
constexpr uint64_t kFhCached = 1;       // counted as a cached open of the inode
constexpr uint64_t kFhPassthrough = 2;  // counted as a passthrough open

// Drops the mount's page cache of `ino` if it may hold pages (the file
// was opened without passthrough since). Called after the reply: the
// kernel waits for nothing of this request while it invalidates. The
// kernel forgets the file's attributes too (one GETATTR later).
void DropPageCache(FsContext& ctx, fuse_ino_t ino) {
  if (!ctx.passthrough().TakePaged(ino)) return;
  if (fuse_lowlevel_notify_inval_inode(ctx.session(), ino, 0, 0) == 0) {
    ctx.passthrough().CountCacheDropped();
  }
}

// Whether the caller may open `id` for reading; replies the error if not.
bool Allowed(fuse_req_t req, FsContext& ctx, NodeId id, int flags) {
  if ((flags & O_ACCMODE) != O_RDONLY) {
    ReplyError(req, EROFS);  // the mirror is read-only
    return false;
  }
  if (ctx.check_access() && !ctx.MayAccess(req, id, R_OK)) {
    ReplyError(req, EACCES);
    return false;
  }
  if (SourcePermissions* perms = ctx.source_permissions()) {
    if (fuse_req_ctx(req)->uid != 0) {
      if (int err = perms->Check(CallerOf(req), id, R_OK); err != 0) {
        ReplyError(req, -err);
        return false;
      }
    }
  }
  return true;
}

void Open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi, bool dir) {
  FsContext& c = Ctx(req);
  const bool passthrough = !dir && c.passthrough().active();
  if (!c.check_access() && c.source_permissions() == nullptr && !passthrough) {
    return (void)fuse_reply_err(req, ENOSYS);  // not an error
  }
  Guarded(req, dir ? "opendir" : "open", [&] {
    FsContext& ctx = Ctx(req);
    fi->fh = kFhUntracked;
    if (ctx.IsNode(ino)) {
      ctx.requests().NoteUse();
      const NodeId id = FsContext::NodeOf(ino);
      if (!Allowed(req, ctx, id, fi->flags)) return;
      if (passthrough && S_ISREG(ctx.ns().node(id).mode)) {
        bool first = false;
        const int backing = ctx.passthrough().Open(ino, &first);
        if (backing >= 0) {
          fi->fh = kFhPassthrough;
          fi->keep_cache = 0;  // the kernel refuses FOPEN_KEEP_CACHE with passthrough
          fi->noflush = 1;
          InitReplyPatch::PassThroughNextOpen(backing);
          const int sent = fuse_reply_open(req, fi);
          InitReplyPatch::PassThroughNextOpen(-1);
          // Not delivered (the open was interrupted): no RELEASE will come.
          if (sent != 0) return (void)ctx.passthrough().Release(ino, true);
          ctx.NotePassthroughOpen(id);
          // Pages of earlier opens without passthrough are no longer read.
          if (first) DropPageCache(ctx, ino);
          return;
        }
        fi->fh = kFhCached;
      }
    }
    fi->keep_cache = 1;
    if (fuse_reply_open(req, fi) != 0 && fi->fh == kFhCached) {
      ctx.passthrough().Release(ino, false);  // not delivered: no RELEASE will come
    }
  });
}

}  // namespace

void OpOpen(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Open(req, ino, fi, false);
}

void OpOpendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Open(req, ino, fi, true);
}

void OpRelease(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  FsContext& ctx = Ctx(req);
  bool last_cached = false;
  if (fi->fh == kFhCached || fi->fh == kFhPassthrough) {
    last_cached = ctx.passthrough().Release(ino, fi->fh == kFhPassthrough);
  }
  fuse_reply_err(req, 0);
  if (!last_cached || !ctx.IsNode(ino)) return;
  // The file was read through the page cache (opened before it was
  // resident): if a tier file holds it now, its next opens pass through,
  // and its pages in the mount's cache would only hold its bytes twice.
  if (ctx.InOneTierFile(FsContext::NodeOf(ino))) DropPageCache(ctx, ino);
}

}  // namespace tierfs
