#include "fs/mount/session.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "fs/mount/detached_log.h"
#include "fs/mount/idle_exit.h"
#include "fs/mount/mount.h"
#include "fs/mount/service_notify.h"
#include "fs/mount/shutdown_guard.h"
#include "tiering/base/log.h"
#include "tiering/base/log_cap.h"

namespace tierfs {
namespace {

// Raises the mount's readahead (the kernel only ever lowers it from
// max_readahead, so 1 MiB reads of shards need this). Runs once the loop
// serves requests: stat() of the mount point is answered by ourselves, and
// INIT has been answered. `kb` kMaxRequestReadAhead: the largest request
// the kernel sends, at least 1 MiB.
void SetReadAhead(const std::string& mountpoint, unsigned kb, const InitReplyPatch& init) {
  struct stat st;
  if (kb == 0 || ::stat(mountpoint.c_str(), &st) != 0) return;
  if (kb == MountConfig::kMaxRequestReadAhead) {
    kb = std::max(1024u, static_cast<unsigned>(init.max_pages_replied()) * 4);
  }
  std::string path =
      fmt::format("/sys/class/bdi/{}:{}/read_ahead_kb", major(st.st_dev), minor(st.st_dev));
  std::ofstream out(path);
  out << kb << "\n";
  out.flush();
  if (!out) {
    TIERFS_LOG(kDebug, "cannot set {} (needs root); readahead stays the kernel's", path);
  } else {
    TIERFS_LOG(kDebug, "readahead of the mount set to {} KiB", kb);
  }
}

// The second front door, once the store has started: it starts asking the
// peers and answering them (PeerService owns both), or neither.
std::unique_ptr<PeerService> StartPeerService(Engine* store, const Namespace* ns, int listener) {
  JobPeers* peers = store->peers();
  if (peers == nullptr) return nullptr;
  auto service = PeerService::Start(peers, ns, &store->read_path(), listener);
  if (!service.ok()) {
    TIERFS_LOG(kError,
               "peers: {}; this node neither asks nor serves peers (its misses read SOURCE)",
               service.status().message());
    return nullptr;
  }
  TIERFS_LOG(kInfo, "peers: '{}' of {} serving and asking", peers->self(), peers->size());
  return std::move(service).value();
}

// The text of /proc/self/mountinfo; "" if it cannot be read.
std::string ReadMountinfo() {
  std::ifstream in("/proc/self/mountinfo");
  std::ostringstream text;
  text << in.rdbuf();
  return in ? text.str() : std::string();
}

}  // namespace

std::unique_ptr<IdleExit> TierfsMount::StartIdleExit() {
  if (config_.idle_exit == 0) return nullptr;
  const std::string device = MountDevice(ReadMountinfo(), mountpoint_);
  if (device.empty()) {
    TIERFS_LOG(kWarning,
               "idle_exit={}: the mount on {} is not in /proc/self/mountinfo; the daemon will "
               "not leave by itself",
               config_.idle_exit, mountpoint_);
    return nullptr;
  }
  RequestCounters* requests = &ctx_->requests();
  fuse_session* se = session_->get();
  const pthread_t loop_thread = ::pthread_self();
  auto idle = std::make_unique<IdleExit>(
      std::chrono::seconds(config_.idle_exit), device,
      IdleExit::Hooks{ReadMountinfo,
                      [requests] { return requests->last_use_ns.load(std::memory_order_relaxed); },
                      [se, loop_thread] {
                        // As SIGTERM does: the loop returns, then the usual clean
                        // shutdown and unmount. The signal wakes the loop's thread
                        // even where libfuse installed no handler (ShutdownGuard did).
                        fuse_session_exit(se);
                        ::pthread_kill(loop_thread, SIGTERM);
                      }});
  idle->Start();
  TIERFS_LOG(kInfo, "idle_exit: unmounting after {} s without a bind mount or a reader",
             config_.idle_exit);
  return idle;
}

void TierfsMount::Detach() {
  if (!config_.foreground) {
    // No thread runs yet (the scan's have been joined, promotion threads start
    // later), so forking is safe.
    UseDetachedLog(config_.log_to, mountpoint_);
    fuse_daemonize(0);
    TIERFS_LOG(kInfo, "detached: serving {} on {} (pid {})", source_path_, mountpoint_, ::getpid());
  } else if (!config_.log_to.empty() && config_.log_to[0] == '/') {
    if (int err = Log::UseFile(config_.log_to); err < 0) {
      TIERFS_LOG(kWarning, "log={}: {}; logging to stderr", config_.log_to, std::strerror(-err));
    }
  }
  // Not dumpable: no core file of the RAM tier's bytes (other users'
  // files, a root daemon's), and a daemon run as the job's user cannot be
  // ptrace()d or have its memory read through /proc by that user's other
  // processes (its /proc entries become root's). tierfs's main() did it
  // before anything else; again here for any other caller of RunMount.
  if (::prctl(PR_SET_DUMPABLE, 0) != 0) {
    TIERFS_LOG(kWarning, "prctl(PR_SET_DUMPABLE, 0): {}", std::strerror(errno));
  }
}

void TierfsMount::FinishPromotions() {
  if (metrics_) metrics_->Stop();
  if (peer_service_) peer_service_->Stop();  // its requests read through the store
  engine_->Shutdown();
}

int TierfsMount::Serve() {
  ShutdownGuard guard(session_->get(), config_.shutdown_timeout);
  if (opened_as_.active()) {
    guard.set_unmount([this] { return opened_as_.Unmount(fuse_session_fd(session_->get())); });
  }
  Detach();
  engine_->Start();  // threads only now: they would not survive the fork
  peer_service_ = StartPeerService(engine_.get(), ns_.get(), std::exchange(peer_listener_, -1));
  stats_->set_peer_service(peer_service_.get());
  if (metrics_) metrics_->Start();
  guard.Start();
  std::thread tune([this] {
    SetReadAhead(opened_as_.active() ? opened_as_.mounted_path() : mountpoint_,
                 fd_mount_ ? 0 : config_.read_ahead_kb, ctx_->init_patch());
  });
  NotifyReady(
      fmt::format("serving {} on {} ({} files)", source_path_, mountpoint_, ns_->file_count()));
  std::unique_ptr<IdleExit> idle = StartIdleExit();
  const int rc = session_->Loop(config_.threads);
  if (idle) idle->Stop();
  NotifyStopping("unmounting: stopping promotions");
  tune.join();
  session_->RemoveSignalHandlers();
  FinishPromotions();
  guard.Finish();
  session_.reset();  // unmounts
  TIERFS_LOG(kInfo, "unmounted {}", mountpoint_);
  // The loop returns the signal number when SIGINT/SIGTERM/SIGHUP ended it:
  // that is a clean, requested unmount.
  const bool clean = rc == 0 || rc == SIGINT || rc == SIGTERM || rc == SIGHUP;
  if (!clean) TIERFS_LOG(kError, "the FUSE loop failed: {}", std::strerror(rc < 0 ? -rc : rc));
  return ExitStatus(clean ? Blame::kNone : Blame::kMachine);
}

int RunMount(const MountConfig& config) {
  Log::SetLevel(config.log_level);
  SetLogFileCap(config.log_max);
  TierfsMount mount(config);
  if (MountFailure failed = mount.Make()) {
    std::fprintf(stderr, "tierfs: %s\n", failed.message.c_str());
    return ExitStatus(failed.blame);
  }
  return mount.Serve();
}

}  // namespace tierfs
