// Every operation that would change the mirror answers EROFS: the dataset is
// read-only while mounted. Writes and truncation of the control files
// (.tierfs/order, stage, prefetch, revalidate) are the exception, for the
// mount's owner and root (order and stage for anyone with control_owner=any).
#include "fs/fuse/handler.h"

namespace tierfs {
namespace {

void Reject(fuse_req_t req) {
  Ctx(req).requests().rejected_writes.fetch_add(1, std::memory_order_relaxed);
  fuse_reply_err(req, EROFS);
}

bool MayControl(fuse_req_t req, fuse_ino_t ino) {
  return Ctx(req).control().MayWrite(ino, fuse_req_ctx(req)->uid);
}

void Write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
           fuse_file_info*) {
  FsContext& ctx = Ctx(req);
  if (!ctx.control().Owns(ino)) return Reject(req);
  if (!MayControl(req, ino)) return ReplyError(req, EACCES);
  Guarded(req, "write", [&] {
    const HintWriter writer{static_cast<uint64_t>(fuse_req_ctx(req)->pid), CallerOf(req)};
    ssize_t n =
        ctx.control().Write(ino, writer, static_cast<uint64_t>(off), std::string_view(buf, size));
    if (n < 0) return ReplyError(req, static_cast<int>(-n));
    fuse_reply_write(req, size);  // a control file takes the whole write or refuses it
  });
}

void Setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  FsContext& ctx = Ctx(req);
  if (!ctx.control().Owns(ino)) return Reject(req);
  if (!MayControl(req, ino)) return ReplyError(req, EACCES);
  Guarded(req, "setattr", [&] {
    // O_TRUNC of a control file (times that come with it are ignored);
    // anything else (chmod, chown, a non-zero size) is refused.
    const int allowed = FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW |
                        FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_CTIME;
    if ((to_set & ~allowed) || ((to_set & FUSE_SET_ATTR_SIZE) && attr->st_size != 0)) {
      return ReplyError(req, EPERM);
    }
    if (to_set & FUSE_SET_ATTR_SIZE) {
      if (int err = ctx.control().Truncate(ino)) return ReplyError(req, -err);
    }
    struct stat st;
    if (int err = ctx.control().GetAttr(ino, &st)) return ReplyError(req, -err);
    st.st_size = 0;
    fuse_reply_attr(req, &st, 0);
  });
}

}  // namespace

void SetReadOnlyOps(fuse_lowlevel_ops* ops) {
  ops->setattr = Setattr;
  ops->mknod = [](fuse_req_t req, fuse_ino_t, const char*, mode_t, dev_t) { Reject(req); };
  ops->mkdir = [](fuse_req_t req, fuse_ino_t, const char*, mode_t) { Reject(req); };
  ops->unlink = [](fuse_req_t req, fuse_ino_t, const char*) { Reject(req); };
  ops->rmdir = [](fuse_req_t req, fuse_ino_t, const char*) { Reject(req); };
  ops->symlink = [](fuse_req_t req, const char*, fuse_ino_t, const char*) { Reject(req); };
  ops->rename = [](fuse_req_t req, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned int) {
    Reject(req);
  };
  ops->link = [](fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) { Reject(req); };
  ops->write = Write;
  ops->create = [](fuse_req_t req, fuse_ino_t, const char*, mode_t, fuse_file_info*) {
    Reject(req);
  };
  ops->setxattr = [](fuse_req_t req, fuse_ino_t, const char*, const char*, size_t, int) {
    Reject(req);
  };
  ops->removexattr = [](fuse_req_t req, fuse_ino_t, const char*) { Reject(req); };
  ops->fallocate = [](fuse_req_t req, fuse_ino_t, int, off_t, off_t, fuse_file_info*) {
    Reject(req);
  };
  ops->copy_file_range = [](fuse_req_t req, fuse_ino_t, off_t, fuse_file_info*, fuse_ino_t, off_t,
                            fuse_file_info*, size_t, int) { Reject(req); };
}

}  // namespace tierfs
