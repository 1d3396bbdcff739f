// Shared helpers of the FUSE handlers. Exceptions never cross into libfuse:
// every handler body runs inside Guarded(), which turns std::bad_alloc into
// ENOMEM and any other exception, std::exception or not, into EIO and a log
// line.
#pragma once

#include <cxxabi.h>
#include <fuse_lowlevel.h>

#include <cerrno>
#include <exception>
#include <new>
#include <utility>

#include "fs/fuse/filesystem.h"
#include "tiering/base/log_limiter.h"

namespace tierfs {

inline FsContext& Ctx(fuse_req_t req) { return *static_cast<FsContext*>(fuse_req_userdata(req)); }

// Replies with an error and counts it. `err` is a positive errno.
inline void ReplyError(fuse_req_t req, int err) {
  Ctx(req).requests().errors.fetch_add(1, std::memory_order_relaxed);
  fuse_reply_err(req, err);
}

// Runs `body` and catches whatever it throws: 0 if it returned, else the
// errno to reply: ENOMEM for std::bad_alloc, EIO for any other exception
// (std::exception or not), logged with `op`. A thread's cancellation
// unwinding (abi::__forced_unwind) goes on: it must not be swallowed.
template <typename Body>
int RunGuarded(const char* op, Body&& body) {
  try {
    body();
    return 0;
  } catch (const abi::__forced_unwind&) {
    throw;
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  } catch (...) {
    TIERFS_LOG_SAMPLED(kError, "{} failed: {}", op, DescribeCurrentException());
    return EIO;
  }
}

// Runs `body`, which must reply exactly once unless it throws before
// replying; a throw is answered with RunGuarded's errno.
template <typename Body>
void Guarded(fuse_req_t req, const char* op, Body&& body) {
  if (int err = RunGuarded(op, std::forward<Body>(body)); err != 0) ReplyError(req, err);
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
