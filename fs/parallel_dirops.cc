#include "fs/parallel_dirops.h"

#include <linux/fuse.h>

#include <cstring>
#include <vector>

namespace tierfs {

void InitReplyPatch::OnRequest(const void* buf, size_t len) {
  if (replied_.load(std::memory_order_acquire)) return;
  fuse_in_header in;
  if (len < sizeof in + offsetof(fuse_init_in, flags) + sizeof(uint32_t)) return;
  std::memcpy(&in, buf, sizeof in);
  if (in.opcode != FUSE_INIT || in.unique == kNone) return;
  uint32_t flags;
  std::memcpy(&flags, static_cast<const char*>(buf) + sizeof in + offsetof(fuse_init_in, flags),
              sizeof flags);
  offered_.store((flags & FUSE_PARALLEL_DIROPS) != 0, std::memory_order_relaxed);
  init_unique_.store(in.unique, std::memory_order_release);
}

ssize_t InitReplyPatch::Writev(int fd, const struct iovec* iov, int count) {
  const uint64_t unique = init_unique_.load(std::memory_order_acquire);
  if (unique == kNone || replied_.load(std::memory_order_acquire) || count < 1 ||
      iov[0].iov_len < sizeof(fuse_out_header)) {
    return ::writev(fd, iov, count);
  }
  fuse_out_header out;
  std::memcpy(&out, iov[0].iov_base, sizeof out);
  if (out.unique != unique) return ::writev(fd, iov, count);
  replied_.store(true, std::memory_order_release);
  // The INIT reply: gather it, add the flag, send it in one write as writev would.
  std::vector<char> msg;
  for (int i = 0; i < count; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    msg.insert(msg.end(), p, p + iov[i].iov_len);
  }
  const size_t flags_at = sizeof out + offsetof(fuse_init_out, flags);
  if (out.error == 0 && offered_.load(std::memory_order_relaxed) &&
      msg.size() >= flags_at + sizeof(uint32_t)) {
    uint32_t flags;
    std::memcpy(&flags, msg.data() + flags_at, sizeof flags);
    flags |= FUSE_PARALLEL_DIROPS;
    std::memcpy(msg.data() + flags_at, &flags, sizeof flags);
    negotiated_.store(true, std::memory_order_release);
  }
  return ::write(fd, msg.data(), msg.size());
}

}  // namespace tierfs
