// The read path: reads served from memory (control files) or through the
// ReadPath (tiers, then SOURCE). Opens are in fs/fuse/ops_open.cc.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "fs/fuse/handler.h"
#include "tiering/base/aligned_buffer.h"

namespace tierfs {

void OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info*) {
  Guarded(req, "read", [&] {
    FsContext& ctx = Ctx(req);
    if (off < 0) return ReplyError(req, EINVAL);
    if (ctx.control().Owns(ino)) {
      if (!ctx.control().MayRead(ino, fuse_req_ctx(req)->uid)) return ReplyError(req, EACCES);
      std::string_view data;
      std::shared_ptr<const std::string> hold;
      if (int err = ctx.control().Read(ino, static_cast<uint64_t>(off), size, &data, &hold)) {
        return ReplyError(req, -err);
      }
      return (void)fuse_reply_buf(req, data.data(), data.size());
    }
    ctx.requests().read.fetch_add(1, std::memory_order_relaxed);  // data reads only
    ctx.requests().NoteUse();
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
    ctx.requests().by_uid.Add(fuse_req_ctx(req)->uid, static_cast<uint64_t>(n));
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
