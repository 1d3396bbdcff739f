// FUSE_PARALLEL_DIROPS for libfuse versions that never send it, and the
// other INIT and OPEN reply fields libfuse 3.14 cannot write (passthrough,
// max_pages beyond 1 MiB): see InitReplyPatch.
//
// Without FUSE_PARALLEL_DIROPS in the INIT reply the kernel holds a
// directory's lock across every LOOKUP and READDIR in it: the lookups of one
// directory run one at a time, however many threads ask. libfuse before 3.17
// (upstream commit c9905341, "Pass FUSE_PARALLEL_DIROPS to kernel") puts the
// capability in conn->want but never in the reply, so a file system built
// against Debian's 3.14 cannot have it. InitReplyPatch adds the flag to the
// INIT reply on its way to the kernel, through libfuse's custom session I/O,
// when the kernel offered it. Every other message passes untouched but
// the OPEN replies a handler announces (PassThroughNextOpen).
#pragma once

// REQUIRES: FUSE_USE_VERSION defined by the includer, as for libfuse itself.
#include <fuse3/fuse_lowlevel.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tierfs {

// The state of one session's INIT exchange. Thread-safe: FUSE workers call
// OnRequest and Writev concurrently.
//
// The same hook carries what libfuse 3.14 cannot say for FUSE passthrough
// (Linux 6.9+): FUSE_PASSTHROUGH and max_stack_depth in the INIT reply
// (WantPassthrough), and a backing id with FOPEN_PASSTHROUGH in an OPEN
// reply (PassThroughNextOpen); and a larger max_pages than libfuse's 1 MiB
// (SetMaxPages).
class InitReplyPatch {
 public:
  // Sees each request read from /dev/fuse (`len` bytes at `buf`).
  void OnRequest(const void* buf, size_t len);
  // Sends a reply as writev(2) would, with FUSE_PARALLEL_DIROPS added to a
  // successful INIT reply when the kernel offered it (and FUSE_PASSTHROUGH,
  // max_pages as set below); an OPEN reply announced by PassThroughNextOpen
  // on this thread carries its backing id.
  ssize_t Writev(int fd, const struct iovec* iov, int count);
  // Whether the INIT reply carried FUSE_PARALLEL_DIROPS.
  bool negotiated() const { return negotiated_.load(std::memory_order_acquire); }

  // REQUIRES: before the INIT exchange. Ask for FUSE_PASSTHROUGH when the
  // kernel offers it.
  void WantPassthrough(bool want) { want_passthrough_.store(want, std::memory_order_relaxed); }
  // REQUIRES: before the INIT exchange. Reply max_pages = `pages` when it is
  // more than libfuse's (the kernel caps it at its max_pages_limit).
  void SetMaxPages(uint16_t pages) { max_pages_.store(pages, std::memory_order_relaxed); }
  // Whether the kernel's INIT offered FUSE_PASSTHROUGH (known once the INIT
  // request was read, before the init handler runs).
  bool passthrough_offered() const { return pt_offered_.load(std::memory_order_acquire); }
  // Whether the INIT reply asked for it.
  bool passthrough_negotiated() const { return pt_negotiated_.load(std::memory_order_acquire); }
  // The max_pages the INIT reply said (0 before it went out).
  uint16_t max_pages_replied() const { return max_pages_replied_.load(std::memory_order_acquire); }
  // The next OPEN reply this thread sends is answered in passthrough mode
  // on backing file `backing_id` (-1: as libfuse wrote it). Call it just
  // before fuse_reply_open and with -1 just after.
  static void PassThroughNextOpen(int32_t backing_id);

 private:
  ssize_t WriteInitReply(int fd, const struct iovec* iov, int count);
  static constexpr uint64_t kNone = 0;  // no INIT seen (the kernel never uses unique 0 for INIT)
  std::atomic<bool> replied_{false};    // the INIT reply went out: nothing more to watch
  std::atomic<uint64_t> init_unique_{kNone};
  std::atomic<bool> offered_{false};  // the kernel's INIT flags had FUSE_PARALLEL_DIROPS
  std::atomic<bool> negotiated_{false};
  std::atomic<bool> want_passthrough_{false};
  std::atomic<bool> pt_offered_{false}, pt_negotiated_{false};
  std::atomic<uint16_t> max_pages_{0}, max_pages_replied_{0};
};

// Installs the reply patch: routes the session's I/O through
// `Fs::init_patch()` (INIT and OPEN replies patched, the rest untouched).
// `se` must be mounted (fuse_session_mount) and its userdata an `Fs*`.
// Returns 0 or -errno.
template <class Fs>
int InstallReplyPatch(fuse_session* se) {
  static const fuse_custom_io io = {
      .writev = [](int fd, struct iovec* iov, int count, void* userdata) -> ssize_t {
        return static_cast<Fs*>(userdata)->init_patch().Writev(fd, iov, count);
      },
      .read = [](int fd, void* buf, size_t len, void* userdata) -> ssize_t {
        const ssize_t n = ::read(fd, buf, len);
        if (n > 0) static_cast<Fs*>(userdata)->init_patch().OnRequest(buf, static_cast<size_t>(n));
        return n;
      },
      .splice_receive = nullptr,
      .splice_send = nullptr,
  };
  return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

}  // namespace tierfs
