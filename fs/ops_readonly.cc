// Every operation that would change the mirror answers EROFS: the dataset is
// read-only while mounted.
#include "fs/handler.h"

namespace tierfs {
namespace {

void Reject(fuse_req_t req) {
  Ctx(req).requests().rejected_writes.fetch_add(1, std::memory_order_relaxed);
  fuse_reply_err(req, EROFS);
}

}  // namespace

void SetReadOnlyOps(fuse_lowlevel_ops* ops) {
  ops->setattr = [](fuse_req_t req, fuse_ino_t, struct stat*, int, fuse_file_info*) {
    Reject(req);
  };
  ops->mknod = [](fuse_req_t req, fuse_ino_t, const char*, mode_t, dev_t) { Reject(req); };
  ops->mkdir = [](fuse_req_t req, fuse_ino_t, const char*, mode_t) { Reject(req); };
  ops->unlink = [](fuse_req_t req, fuse_ino_t, const char*) { Reject(req); };
  ops->rmdir = [](fuse_req_t req, fuse_ino_t, const char*) { Reject(req); };
  ops->symlink = [](fuse_req_t req, const char*, fuse_ino_t, const char*) { Reject(req); };
  ops->rename = [](fuse_req_t req, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned int) {
    Reject(req);
  };
  ops->link = [](fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) { Reject(req); };
  ops->write = [](fuse_req_t req, fuse_ino_t, const char*, size_t, off_t, fuse_file_info*) {
    Reject(req);
  };
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
