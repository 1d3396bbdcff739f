#include "fs/fuse/parallel_dirops.h"

#include <linux/fuse.h>

#include <cstring>
#include <vector>

namespace tierfs {

namespace {

// What Debian 12's header (protocol 7.38) lacks, from include/uapi/linux/fuse.h.
constexpr uint64_t kFusePassthrough = 1ull << 37;  // INIT flag (flags2 bit 5)
constexpr uint32_t kFopenPassthrough = 1u << 7;    // open_flags
constexpr uint32_t kInitExt = 1u << 30;            // FUSE_INIT_EXT: flags2 is valid
// struct fuse_open_out as of 7.40: the padding became backing_id.
struct OpenOut {
  uint64_t fh;
  uint32_t open_flags;
  int32_t backing_id;
};
static_assert(sizeof(OpenOut) == sizeof(fuse_open_out));
// init_out.max_stack_depth (7.40) is unused[0] in the 7.38 header.
constexpr size_t kMaxStackDepthAt = offsetof(fuse_init_out, unused);

thread_local int32_t next_open_backing = -1;

template <class T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void Store(char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

}  // namespace

void InitReplyPatch::PassThroughNextOpen(int32_t backing_id) { next_open_backing = backing_id; }

void InitReplyPatch::OnRequest(const void* buf, size_t len) {
  if (replied_.load(std::memory_order_acquire)) return;
  fuse_in_header in;
  if (len < sizeof in + offsetof(fuse_init_in, flags) + sizeof(uint32_t)) return;
  std::memcpy(&in, buf, sizeof in);
  if (in.opcode != FUSE_INIT || in.unique == kNone) return;
  const char* arg = static_cast<const char*>(buf) + sizeof in;
  const uint32_t flags = Load<uint32_t>(arg + offsetof(fuse_init_in, flags));
  offered_.store((flags & FUSE_PARALLEL_DIROPS) != 0, std::memory_order_relaxed);
  if ((flags & kInitExt) != 0 && len >= sizeof in + offsetof(fuse_init_in, flags2) + 4) {
    const uint64_t flags2 = Load<uint32_t>(arg + offsetof(fuse_init_in, flags2));
    pt_offered_.store(((flags2 << 32) & kFusePassthrough) != 0, std::memory_order_release);
  }
  init_unique_.store(in.unique, std::memory_order_release);
}

ssize_t InitReplyPatch::Writev(int fd, const struct iovec* iov, int count) {
  if (next_open_backing >= 0 && count == 2 && iov[0].iov_len == sizeof(fuse_out_header) &&
      iov[1].iov_len == sizeof(OpenOut)) {
    // The OPEN reply the handler announced on this thread.
    OpenOut open = Load<OpenOut>(static_cast<const char*>(iov[1].iov_base));
    open.open_flags = kFopenPassthrough;  // alone: the kernel refuses it with keep_cache
    open.backing_id = next_open_backing;
    next_open_backing = -1;
    struct iovec patched[2] = {iov[0], {&open, sizeof open}};
    return ::writev(fd, patched, 2);
  }
  const uint64_t unique = init_unique_.load(std::memory_order_acquire);
  if (unique == kNone || replied_.load(std::memory_order_acquire) || count < 1 ||
      iov[0].iov_len < sizeof(fuse_out_header)) {
    return ::writev(fd, iov, count);
  }
  fuse_out_header out;
  std::memcpy(&out, iov[0].iov_base, sizeof out);
  if (out.unique != unique) return ::writev(fd, iov, count);
  replied_.store(true, std::memory_order_release);
  return WriteInitReply(fd, iov, count);
}

ssize_t InitReplyPatch::WriteInitReply(int fd, const struct iovec* iov, int count) {
  // Gather it, add the flags, send it in one write as writev would.
  std::vector<char> msg;
  for (int i = 0; i < count; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    msg.insert(msg.end(), p, p + iov[i].iov_len);
  }
  fuse_out_header out;
  std::memcpy(&out, msg.data(), sizeof out);
  char* arg = msg.data() + sizeof out;
  const size_t flags_at = offsetof(fuse_init_out, flags);
  const size_t arg_size = msg.size() - sizeof out;
  if (out.error == 0 && arg_size >= flags_at + sizeof(uint32_t)) {
    uint32_t flags = Load<uint32_t>(arg + flags_at);
    if (offered_.load(std::memory_order_relaxed)) {
      flags |= FUSE_PARALLEL_DIROPS;
      negotiated_.store(true, std::memory_order_release);
    }
    if (arg_size >= kMaxStackDepthAt + sizeof(uint32_t)) {
      const uint16_t pages = max_pages_.load(std::memory_order_relaxed);
      const size_t pages_at = offsetof(fuse_init_out, max_pages);
      if ((flags & FUSE_MAX_PAGES) != 0 && pages > Load<uint16_t>(arg + pages_at)) {
        Store<uint16_t>(arg + pages_at, pages);
      }
      max_pages_replied_.store((flags & FUSE_MAX_PAGES) ? Load<uint16_t>(arg + pages_at) : 32,
                               std::memory_order_release);
      if (want_passthrough_.load(std::memory_order_relaxed) &&
          pt_offered_.load(std::memory_order_relaxed)) {
        const size_t flags2_at = offsetof(fuse_init_out, flags2);
        flags |= kInitExt;
        Store<uint32_t>(arg + flags2_at, Load<uint32_t>(arg + flags2_at) |
                                             static_cast<uint32_t>(kFusePassthrough >> 32));
        // The mount counts as one level of stacking: backing files must be
        // on file systems that stack nothing (ext4, XFS, tmpfs, memfd).
        Store<uint32_t>(arg + kMaxStackDepthAt, 1);
        pt_negotiated_.store(true, std::memory_order_release);
      }
    }
    Store<uint32_t>(arg + flags_at, flags);
  }
  return ::write(fd, msg.data(), msg.size());
}

}  // namespace tierfs
