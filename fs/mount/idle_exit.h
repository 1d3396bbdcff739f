// IdleExit (-o idle_exit=SECONDS): a daemon shared by a node's jobs leaves
// once nobody has used it for SECONDS in a row. "Used" is either of:
//   - another mount of its file system exists: a job's bind mount of the
//     daemon's mount (counted in /proc/self/mountinfo by the mount's
//     major:minor: the daemon's own mount is one entry, each bind one more;
//     reading mountinfo sends the mount no request), or
//   - a request for the dataset arrived (FsContext's last-use clock; the
//     control directory and statfs do not count: monitors read those).
// It checks every Period(SECONDS) on a thread of its own whose wait Stop()
// interrupts, and leaves through the hook it is given (the mount's clean
// unmount), once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "tiering/base/mutex.h"

namespace tierfs {

// The device ("MAJOR:MINOR", as mountinfo writes it) of the last mount in
// `mountinfo` (the text of /proc/PID/mountinfo) whose mount point is `path`
// (octal escapes of mountinfo undone) and whose type is fuse or fuse.*;
// "" if there is none.
std::string MountDevice(std::string_view mountinfo, std::string_view path);

// How many mounts in `mountinfo` have device `device` (bind mounts, of the
// root or of a subdirectory, included).
size_t MountsOfDevice(std::string_view mountinfo, std::string_view device);

class IdleExit {
 public:
  struct Hooks {
    std::function<std::string()> mountinfo;  // the text of mountinfo now ("" if unreadable)
    std::function<int64_t()> last_use_ns;    // steady clock (ns) of the last request counted
    std::function<void()> leave;             // starts the clean unmount; called at most once
  };

  // Leaves after `idle` without use of the mount whose device is `device`.
  IdleExit(std::chrono::seconds idle, std::string device, Hooks hooks);
  ~IdleExit() { Stop(); }
  IdleExit(const IdleExit&) = delete;
  IdleExit& operator=(const IdleExit&) = delete;

  // min(idle / 4, 5 s), at least 100 ms: how often it looks.
  static std::chrono::milliseconds Period(std::chrono::seconds idle);

  // Starts the checking thread. After any fork.
  void Start();
  // Stops it (at once: its wait is interrupted) and joins it. Idempotent.
  void Stop();
  // Whether it decided to leave (and called hooks.leave).
  bool left() const { return left_; }

 private:
  void Run();

  const std::chrono::seconds idle_;
  const std::string device_;
  const Hooks hooks_;
  Mutex mu_;  // guards stop_; a leaf lock (cv_ wakes the thread)
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  bool left_ = false;  // written by the thread, read after Stop()
  std::thread thread_;
};

}  // namespace tierfs
