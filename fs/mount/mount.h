// TierfsMount: one tierfs mount, made (every check, the scan, the store, the
// FUSE mount: fs/mount/mount.cc), then served until unmounted (fs/mount/session.cc).
// Internal to RunMount; the handlers see only the FsContext.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fs/config/options.h"
#include "fs/fuse/filesystem.h"
#include "fs/mount/fuse_session.h"
#include "fs/mount/idle_exit.h"
#include "fs/mount/mount_failure.h"
#include "fs/mount/mount_stats.h"
#include "fs/mount/open_as.h"
#include "fs/telemetry/metrics_server.h"
#include "tiering/io/counting_backend.h"

namespace tierfs {

// One mount: made (every check, the scan, the store, the FUSE mount), then
// served until unmounted. A failure while making it leaves nothing mounted.
// Members are declared in the order they are made and destroyed in reverse.
class TierfsMount {
 public:
  explicit TierfsMount(const MountConfig& config) : config_(config) {}
  ~TierfsMount();

  // Each step in turn, up to a mounted FUSE session; the first failure.
  MountFailure Make();
  // Detaches (unless foreground), starts promotion, the peers and metrics,
  // serves until unmounted or signalled, and takes it all down. The exit
  // status: 0 for a clean unmount.
  int Serve();

 private:
  MountFailure CheckCommandLine();
  MountFailure OpenSourceAndMountpoint();
  MountFailure ScanSource();
  MountFailure OpenStore();
  void ConfigureContext();
  MountFailure MountFuse();
  void Detach();
  // idle_exit=: the thread that ends the loop once the mount is unused
  // (null when off, or when the mount cannot be found in mountinfo).
  // REQUIRES: on the thread that runs the loop, after Detach().
  std::unique_ptr<IdleExit> StartIdleExit();
  // Stops promotion (queued ones dropped, running ones cancelled at their
  // next 1 MiB piece: nothing half-published), the peers and the metrics
  // endpoint. The ShutdownGuard bounds how long this may take (a PFS read
  // can hang): the mount is still taken down and tiers stay consistent.
  void FinishPromotions();

  const MountConfig& config_;
  std::vector<std::string> warnings_;
  std::string no_passthrough_;  // PassthroughUnavailable's answer
  std::unique_ptr<MetricsServer> metrics_;
  std::string source_path_, mountpoint_;
  // open_as=: both opened once as that user; from then on they are those
  // directories (/proc/self/fd/N), never their paths walked again.
  OpenedAs opened_as_;
  std::string source_open_;  // SOURCE as opened: its path or /proc/self/fd/N
  // mount.fuse3 -o drop_privileges mounts itself and hands over the FUSE
  // device as /dev/fd/N: libfuse takes that as the mount point.
  bool fd_mount_ = false;
  uint64_t fd_limit_ = 0, max_open_ = 0;
  std::shared_ptr<Backend> posix_;
  std::unique_ptr<CountingBackend> backend_;
  struct stat source_st_ {};
  std::unique_ptr<Namespace> ns_;
  std::unique_ptr<SourceReader> reader_;
  std::unique_ptr<Engine> engine_;
  // With peers: the job's port as handed over already bound, or -1; taken
  // before the daemon forks, handed to the peer service when it starts.
  int peer_listener_ = -1;
  std::unique_ptr<SourcePermissions> permissions_;
  std::unique_ptr<FsContext> ctx_;
  std::unique_ptr<MountStats> stats_;  // .tierfs/stats and /metrics
  std::unique_ptr<FuseSession> session_;
  std::unique_ptr<PeerService> peer_service_;
};

}  // namespace tierfs
