#include "fs/mount/shutdown_guard.h"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tiering/base/log.h"

namespace tierfs {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP};
std::atomic<int> g_signals{0};
struct sigaction g_chained[3];  // what was installed before (libfuse's exit handler)

void OnTerminate(int sig) {  // async-signal-safe: an atomic, then the chained handler
  g_signals.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < 3; ++i) {
    if (kSignals[i] != sig) continue;
    const struct sigaction& old = g_chained[i];
    if ((old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler != SIG_DFL &&
        old.sa_handler != SIG_IGN) {
      old.sa_handler(sig);
    }
  }
}

}  // namespace

ShutdownGuard::ShutdownGuard(fuse_session* se, unsigned timeout_s)
    : se_(se), timeout_s_(timeout_s) {
  g_signals = 0;
  struct sigaction sa {};
  sa.sa_handler = OnTerminate;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: libfuse's loop must see EINTR, as with its own handler
  for (size_t i = 0; i < 3; ++i) {
    ::sigaction(kSignals[i], &sa, &g_chained[i]);
    // Ignored when the daemon started (a script's `cmd &` ignores SIGINT,
    // nohup SIGHUP): it stays ignored, as asked; libfuse left it so too.
    if ((g_chained[i].sa_flags & SA_SIGINFO) == 0 && g_chained[i].sa_handler == SIG_IGN) {
      ::sigaction(kSignals[i], &g_chained[i], nullptr);
      ignored_.push_back(kSignals[i]);
    }
  }
}

void ShutdownGuard::Finish() {
  done_ = true;
  if (thread_.joinable()) thread_.join();
  // The handler stays: a signal now finds the session gone and only counts.
}

void ShutdownGuard::Start() {
  for (int sig : ignored_) {
    TIERFS_LOG(kInfo,
               "{} is ignored, as this daemon was started (a script's '&', nohup): stop it with "
               "SIGTERM or fusermount3 -u",
               sigabbrev_np(sig) ? fmt::format("SIG{}", sigabbrev_np(sig)) : std::to_string(sig));
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { Watch(); });
}

void ShutdownGuard::Watch() {
  using Clock = std::chrono::steady_clock;
  bool asked = false;
  Clock::time_point deadline;
  while (!done_) {
    const int signals = g_signals.load(std::memory_order_relaxed);
    if (!asked && (signals > 0 || fuse_session_exited(se_))) {
      asked = true;
      deadline = Clock::now() + std::chrono::seconds(timeout_s_);
    }
    if (asked && (signals >= 2 || Clock::now() > deadline)) {
      TIERFS_LOG(kError,
                 "shutdown forced ({}): unmounting without waiting for readers and promotions",
                 signals >= 2 ? "second signal" : "shutdown_timeout");
      // Lazy: the mount is gone, blocked readers get an error.
      if (!unmount_ || !unmount_()) fuse_session_unmount(se_);
      std::_Exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace tierfs
