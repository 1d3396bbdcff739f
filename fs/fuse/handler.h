// Shared helpers of the FUSE handlers. Exceptions never cross into libfuse:
// every handler body runs inside Guarded(), which turns std::bad_alloc into
// ENOMEM and anything else into EIO.
#pragma once

#include <fuse_lowlevel.h>

#include <cerrno>
#include <exception>
#include <new>

#include "fs/fuse/filesystem.h"
#include "tiering/base/log.h"

namespace tierfs {

inline FsContext& Ctx(fuse_req_t req) { return *static_cast<FsContext*>(fuse_req_userdata(req)); }

// Replies with an error and counts it. `err` is a positive errno.
inline void ReplyError(fuse_req_t req, int err) {
  Ctx(req).requests().errors.fetch_add(1, std::memory_order_relaxed);
  fuse_reply_err(req, err);
}

// Runs `body`, which must reply exactly once unless it throws before replying.
template <typename Body>
void Guarded(fuse_req_t req, const char* op, Body&& body) {
  try {
    body();
  } catch (const std::bad_alloc&) {
    ReplyError(req, ENOMEM);
  } catch (const std::exception& e) {
    TIERFS_LOG(kError, "{} failed: {}", op, e.what());
    ReplyError(req, EIO);
  }
}

// Handler groups, wired into one table by TierFsOps().
void InitConnection(void* userdata, struct fuse_conn_info* conn);
void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name);
void OpForget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void OpForgetMulti(fuse_req_t req, size_t count, struct fuse_forget_data* forgets);
void OpGetattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
void OpReadlink(fuse_req_t req, fuse_ino_t ino);
void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi);
void OpReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info* fi);
void OpStatfs(fuse_req_t req, fuse_ino_t ino);
void OpGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size);
void OpListxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void OpOpen(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
void OpOpendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
void OpRelease(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
void OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi);
void SetReadOnlyOps(fuse_lowlevel_ops* ops);

}  // namespace tierfs
