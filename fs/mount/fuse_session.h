// FuseSession: one libfuse low-level session, from creation to teardown.
// It owns the session, its signal handlers and its mount, and undoes
// whichever of them it holds when it goes away, in libfuse's order
// (unmount, handlers, destroy), so a mount that fails half-way leaves
// nothing behind and the teardown is written once.
#pragma once

#include <fuse_lowlevel.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tiering/base/status.h"

namespace tierfs {

class FuseSession {
 public:
  // A session answering with `ops` and `userdata`, libfuse's -o list
  // `options` (and -d for `debug`), with signal handlers installed for
  // SIGINT, SIGTERM and SIGHUP. Fails (EIO) saying which step failed
  // (libfuse prints its own reason first).
  static Result<std::unique_ptr<FuseSession>> Create(const std::string& options, bool debug,
                                                     const fuse_lowlevel_ops& ops, void* userdata);
  ~FuseSession();
  FuseSession(const FuseSession&) = delete;
  FuseSession& operator=(const FuseSession&) = delete;

  fuse_session* get() const { return se_; }

  // Mounts on `path` (a directory, or /dev/fd/N from mount.fuse3). What
  // libfuse and fusermount3 print meanwhile is kept: on success it goes to
  // stderr; on failure it is the Status's message ("" if they said
  // nothing), several lines indented.
  Status Mount(const std::string& path);
  // What unmounts instead of libfuse when this session goes away (a mount
  // libfuse cannot unmount itself: open_as=): given the session's
  // /dev/fuse descriptor, true if nothing is left to unmount.
  void set_unmount(std::function<bool(int fuse_fd)> unmount) { unmount_ = std::move(unmount); }

  // Reads and answers the kernel's INIT request (queued at mount). Best
  // effort: if it is not there within 5 s, or cannot be read, the loop
  // answers it.
  void AnswerInit();
  // Serves requests with up to `threads` workers until unmounted or
  // signalled. Returns libfuse's status: 0, the signal that ended it, or
  // an errno.
  int Loop(unsigned threads);
  // Stops reacting to signals: the loop has returned, and what follows (the
  // shutdown) is watched by the ShutdownGuard.
  void RemoveSignalHandlers();

 private:
  explicit FuseSession(fuse_session* se) : se_(se) {}
  fuse_session* const se_;
  bool handlers_ = false;
  bool mounted_ = false;
  std::function<bool(int)> unmount_;
};

}  // namespace tierfs
