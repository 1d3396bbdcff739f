// The handler table and the connection setup (docs/DECISIONS.md, "Making FUSE fast").
#include "fs/fuse/handler.h"

namespace tierfs {

void InitConnection(void* userdata, struct fuse_conn_info* conn) {
  auto want = [conn](unsigned cap) {
    if (conn->capable & cap) conn->want |= cap;
  };
  want(FUSE_CAP_ASYNC_READ);       // parallel reads of one file
  want(FUSE_CAP_CACHE_SYMLINKS);   // symlink targets stay in the page cache
  want(FUSE_CAP_PARALLEL_DIROPS);  // lookups in one directory run in parallel
  // The dataset is immutable while mounted: no GETATTR before reads.
  conn->want &= ~(FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
  // Listing: by default always READDIRPLUS (one listing primes every entry's
  // attributes) rather than the kernel's guess.
  switch (static_cast<FsContext*>(userdata)->readdir_mode()) {
    case ReaddirMode::kPlus:
      want(FUSE_CAP_READDIRPLUS);
      break;
    case ReaddirMode::kAuto:
      want(FUSE_CAP_READDIRPLUS);
      want(FUSE_CAP_READDIRPLUS_AUTO);
      break;
    case ReaddirMode::kPlain:
      break;
  }
  // With atomic O_TRUNC the kernel would pass O_TRUNC to OPEN, which it never
  // sends (zero-message open): the truncation would silently succeed. Without
  // it, O_TRUNC becomes a SETATTR, which answers EROFS.
  conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
  // 1 MiB requests (libfuse derives max_pages from max_write).
  conn->max_write = 1u << 20;
  conn->max_readahead = 1u << 20;
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  conn->time_gran = 1;
  // The INIT request was read (the kernel's offer is known) and the reply
  // is about to be written: passthrough is asked for now if the daemon may.
  FsContext* ctx = static_cast<FsContext*>(userdata);
  ctx->passthrough().AtInit(ctx->init_patch().passthrough_offered(), ctx->device_fd());
}

const fuse_lowlevel_ops& TierFsOps() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    o.init = InitConnection;
    o.lookup = OpLookup;
    o.forget = OpForget;
    o.forget_multi = OpForgetMulti;
    o.getattr = OpGetattr;
    o.readlink = OpReadlink;
    o.open = OpOpen;
    o.opendir = OpOpendir;
    o.release = OpRelease;
    o.read = OpRead;
    o.readdir = OpReaddir;
    o.readdirplus = OpReaddirplus;
    o.statfs = OpStatfs;
    o.getxattr = OpGetxattr;
    o.listxattr = OpListxattr;
    SetReadOnlyOps(&o);
    return o;
  }();
  return ops;
}

}  // namespace tierfs
