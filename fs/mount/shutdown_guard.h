// ShutdownGuard: no unmount waits forever. From the moment the daemon is
// asked to stop (SIGTERM/SIGINT/SIGHUP, or the kernel ends the session after
// `fusermount3 -u`), the whole shutdown (the FUSE loop joining its workers,
// then promotions finishing) gets `timeout_s`; a second signal or the
// timeout unmounts (lazily: readers blocked in the mount get an error) and
// exits with status 1 at once. A signal the daemon was started with ignored
// (SIGINT for a script's `tierfs ... &`, SIGHUP under nohup) stays ignored. A FUSE worker stuck in
// a PFS read can no longer keep the mount alive: libfuse's loop joins its workers before it
// returns, so the deadline must be watched from another thread.
#pragma once

#include <fuse_lowlevel.h>

#include <atomic>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

namespace tierfs {

class ShutdownGuard {
 public:
  // Counts the termination signals (chaining to the handlers libfuse
  // installed for them). REQUIRES: after fuse_set_signal_handlers(se).
  ShutdownGuard(fuse_session* se, unsigned timeout_s);
  ~ShutdownGuard() { Finish(); }
  ShutdownGuard(const ShutdownGuard&) = delete;
  ShutdownGuard& operator=(const ShutdownGuard&) = delete;

  // What unmounts the mount instead of libfuse (a mount libfuse cannot
  // unmount itself: open_as=); returns false to have libfuse try. Before
  // Start().
  void set_unmount(std::function<bool()> unmount) { unmount_ = std::move(unmount); }
  // Starts the watching thread. After any fork (fuse_daemonize).
  void Start();
  // Stops watching: the shutdown finished in time. Before the session is
  // destroyed.
  void Finish();

 private:
  void Watch();
  fuse_session* const se_;
  const unsigned timeout_s_;
  std::function<bool()> unmount_;
  std::vector<int> ignored_;  // termination signals ignored at the start, left so
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace tierfs
