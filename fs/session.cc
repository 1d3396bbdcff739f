#include "fs/session.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "fs/config_checks.h"
#include "fs/filesystem.h"
#include "fs/metrics_server.h"
#include "fs/mount_checks.h"
#include "fs/open_as.h"
#include "fs/service_notify.h"
#include "fs/shutdown_guard.h"
#include "tiering/base/log.h"
#include "tiering/io/counting_backend.h"

namespace tierfs {
namespace {

// Raises the soft open-file limit to the hard one; returns the new soft limit.
uint64_t RaiseFileLimit() {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

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

// The kernel's cap on a FUSE request's pages (/proc/sys/fs/fuse/max_pages_limit,
// Linux 6.13+; 256 before, libfuse's own 1 MiB), at most what max_pages holds.
uint16_t MaxPagesLimit() {
  std::ifstream in("/proc/sys/fs/fuse/max_pages_limit");
  unsigned limit = 0;
  if (!(in >> limit) || limit == 0) return 0;
  return static_cast<uint16_t>(std::min(limit, 65535u));
}

// Reads and answers the kernel's INIT request (queued at mount). Best
// effort: if it is not there within 5 s, or cannot be read, the loop
// answers it.
void AnswerInit(fuse_session* se) {
  struct pollfd pfd = {fuse_session_fd(se), POLLIN, 0};
  if (::poll(&pfd, 1, 5000) != 1 || (pfd.revents & POLLIN) == 0) return;
  struct fuse_buf buf {};
  int n = fuse_session_receive_buf(se, &buf);
  if (n > 0) fuse_session_process_buf(se, &buf);
  std::free(buf.mem);
}

// fuse_session_mount(), with what libfuse and fusermount3 print meanwhile
// kept in *said (trimmed; several lines indented) instead of on stderr; on
// success it is passed on to stderr. A memory file, not a pipe: fusermount3
// with auto_unmount outlives the mount and keeps its stderr.
int MountSaying(fuse_session* se, const std::string& mountpoint, std::string* said) {
  said->clear();
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  const int capture = ::memfd_create("tierfs-mount-messages", MFD_CLOEXEC);
  if (saved < 0 || capture < 0 || ::dup2(capture, STDERR_FILENO) < 0) {
    if (saved >= 0) ::close(saved);
    if (capture >= 0) ::close(capture);
    return fuse_session_mount(se, mountpoint.c_str());
  }
  const int rc = fuse_session_mount(se, mountpoint.c_str());
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  char buf[4096];
  for (ssize_t n; (n = ::pread(capture, buf, sizeof(buf), static_cast<off_t>(said->size()))) > 0;) {
    said->append(buf, static_cast<size_t>(n));
  }
  ::close(capture);
  if (rc == 0) {
    if (!said->empty()) std::fwrite(said->data(), 1, said->size(), stderr);
    return rc;
  }
  while (!said->empty() && std::isspace(static_cast<unsigned char>(said->back()))) said->pop_back();
  for (size_t at = said->find('\n'); at != std::string::npos; at = said->find('\n', at + 3)) {
    said->replace(at, 1, "\n  ");
  }
  return rc;
}

std::string FuseOptionString(const MountConfig& config, const std::string& source) {
  // Defaults first; the user's options come later and win.
  std::string opts = "subtype=tierfs,default_permissions";
  if (source.find(',') == std::string::npos && source.find('\\') == std::string::npos) {
    opts += ",fsname=" + source;
  } else {
    opts += ",fsname=tierfs";
  }
  for (const auto& o : config.fuse_options) opts += "," + o;
  return opts;
}

// The index file of -o index=: "" (none), the file given, or for "auto"
// namespace.index in the first directory tier, if that directory is the
// daemon's own. Returns ok or a message for the user (EINVAL).
Status IndexPath(const MountConfig& config, std::string* path) {
  path->clear();
  if (config.index != "auto") {
    *path = config.index;
    return Status::Ok();
  }
  if (config.tiering.dirs.empty()) {
    return Status::Error(EINVAL,
                         "index=auto keeps the index in the first directory tier: add "
                         "tier=PATH:SIZE, or give index=FILE");
  }
  const std::string& dir = config.tiering.dirs.front().path;
  if (Status why = CheckPrivateDirectory(dir); !why.ok()) {
    TIERFS_LOG(kWarning, "index=auto: not using {} for the index: {}", dir, why.message());
    return Status::Ok();
  }
  *path = dir + "/namespace.index";
  return Status::Ok();
}

// Stops promotion (queued ones dropped, running ones cancelled at their next
// 1 MiB piece: nothing half-published) and the metrics endpoint. The
// ShutdownGuard bounds how long this may take (a PFS read can hang): the
// mount is still taken down and tiers stay consistent (journaled copies are
// complete; temporary files are removed at the next mount).
void FinishPromotions(TieredStore* store, MetricsServer* metrics, PeerService* peer_service) {
  if (metrics) metrics->Stop();
  if (peer_service) peer_service->Stop();  // its requests read through the store
  store->Shutdown();
}

// The second front door, once the store has started asking the peers: if
// it cannot open, this node stops asking too (a node the others cannot
// reach is not live to them, and should not count itself so).
std::unique_ptr<PeerService> StartPeerService(TieredStore* store, const Namespace* ns) {
  JobPeers* peers = store->peers();
  if (peers == nullptr || !peers->started()) return nullptr;
  auto service = PeerService::Start(peers, ns, &store->read_path());
  if (!service.ok()) {
    TIERFS_LOG(kError,
               "peers: {}; this node neither asks nor serves peers (its misses read SOURCE)",
               service.status().message());
    peers->Stop();
    return nullptr;
  }
  TIERFS_LOG(kInfo, "peers: '{}' of {} serving and asking", peers->self(), peers->size());
  return std::move(service).value();
}

}  // namespace

namespace {

// Where a detached daemon logs when there is no syslog: /var/log/tierfs/
// for root, ~/.local/state/tierfs/ (or $XDG_STATE_HOME/tierfs/) for a user;
// the file is named after the mount point. "" if no such place can be made.
std::string FallbackLogPath(const std::string& mountpoint) {
  std::string name = mountpoint;
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  while (!name.empty() && name[0] == '_') name.erase(0, 1);
  if (name.empty()) name = "root";
  std::string dir;
  if (::geteuid() == 0) {
    dir = "/var/log/tierfs";
  } else if (const char* state = std::getenv("XDG_STATE_HOME"); state && state[0] == '/') {
    dir = std::string(state) + "/tierfs";
  } else if (const char* home = std::getenv("HOME"); home && home[0] == '/') {
    dir = std::string(home) + "/.local/state/tierfs";
  } else {
    return "";
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ::chmod(dir.c_str(), 0750);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    return "";
  }
  return dir + "/" + name + ".log";
}

// Sends the log where -o log= says, or to syslog, or (no syslog here) to
// a file whose path is said on stderr before the daemon detaches.
void UseDetachedLog(const MountConfig& config, const std::string& mountpoint) {
  std::string target = config.log_to;
  bool fallback = false;
  if (target.empty()) {
    if (Log::SyslogAvailable()) {
      target = "syslog";
    } else {
      target = FallbackLogPath(mountpoint);
      fallback = true;
    }
  }
  if (target == "stderr") return;  // the detached daemon's stderr: kept as it is
  if (target == "syslog" || target.empty()) {
    if (target.empty()) {
      std::fprintf(stderr,
                   "tierfs: no syslog here (/dev/log) and no log directory: log lines "
                   "of the detached daemon are lost; use -o log=FILE\n");
    }
    Log::UseSyslog("tierfs");
    return;
  }
  if (int err = Log::UseFile(target); err < 0) {
    std::fprintf(stderr, "tierfs: cannot log to %s: %s; logging to syslog\n", target.c_str(),
                 std::strerror(-err));
    Log::UseSyslog("tierfs");
    return;
  }
  if (fallback) {
    std::fprintf(stderr, "tierfs: no syslog here (/dev/log): the daemon logs to %s\n",
                 target.c_str());
  }
}

}  // namespace

int RunMount(const MountConfig& config) {
  Log::SetLevel(config.log_level);
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "tierfs: %s\n", message.c_str());
    return 1;
  };
  // A bad command line is said before SOURCE is touched (exit 2, at once).
  auto usage = [](const std::string& message) {
    std::fprintf(stderr, "tierfs: %s\n", message.c_str());
    return 2;
  };
  // What SOURCE's and MOUNTPOINT's owners control (exit 3 and 4): their
  // state is not this machine's failure (the Slurm prolog cancels the job).
  auto source_fail = [](const std::string& message) {
    std::fprintf(stderr, "tierfs: %s\n", message.c_str());
    return 3;
  };
  auto mountpoint_fail = [](const std::string& message) {
    std::fprintf(stderr, "tierfs: %s\n", message.c_str());
    return 4;
  };
  std::vector<std::string> warnings;
  if (Status checked = CheckBeforeScan(config, &warnings); !checked.ok()) {
    return usage(checked.message());
  }
  const PassthroughWant passthrough = config.passthrough == "on"    ? PassthroughWant::kOn
                                      : config.passthrough == "off" ? PassthroughWant::kOff
                                                                    : PassthroughWant::kAuto;
  const std::string no_passthrough = PassthroughUnavailable(passthrough);
  if (passthrough == PassthroughWant::kOn && !no_passthrough.empty()) {
    return usage(fmt::format("passthrough=on is impossible here: {}", no_passthrough));
  }
  // The metrics port too: bound now, served once mounted.
  std::unique_ptr<MetricsServer> metrics;
  const FsContext* metrics_ctx = nullptr;
  if (!config.metrics.empty()) {
    Result<std::unique_ptr<MetricsServer>> bound = MetricsServer::Bind(
        config.metrics,
        [&metrics_ctx] { return metrics_ctx ? metrics_ctx->PrometheusText() : std::string(); });
    if (!bound.ok()) return usage(bound.status().message());
    metrics = std::move(bound).value();
  }
  std::string source, mountpoint;
  // open_as=: both opened once as that user; from here on they are those
  // directories (/proc/self/fd/N), never their paths walked again.
  OpenedAs opened_as;
  if (config.open_as_uid >= 0) {
    OpenAsFailure failed = OpenAsFailure::kNone;
    Status err =
        OpenAs(static_cast<uid_t>(config.open_as_uid), static_cast<gid_t>(config.open_as_gid),
               config.source, config.mountpoint, &opened_as, &failed);
    if (failed == OpenAsFailure::kSource) return source_fail(err.message());
    if (failed == OpenAsFailure::kMountpoint) return mountpoint_fail(err.message());
    if (!err.ok()) return ::geteuid() == 0 ? fail(err.message()) : usage(err.message());
    source = opened_as.source_shown();
  } else if (Status err = CheckSource(config.source, &source); !err.ok()) {
    return source_fail(err.message());
  }
  const std::string source_open = opened_as.active() ? opened_as.source_path() : source;
  // mount.fuse3 -o drop_privileges mounts itself and hands over the FUSE
  // device as /dev/fd/N: libfuse takes that as the mount point.
  const bool fd_mount = config.mountpoint.rfind("/dev/fd/", 0) == 0;
  if (fd_mount) {
    mountpoint = config.mountpoint;
  } else if (opened_as.active()) {
    if (Status err = opened_as.CheckMountpoint(config.nonempty); !err.ok()) {
      return mountpoint_fail(err.message());
    }
    mountpoint = opened_as.mount_shown();
  } else if (Status err = CheckMountpoint(config.mountpoint, source, config.nonempty, &mountpoint);
             !err.ok()) {
    return mountpoint_fail(err.message());
  }
  if (!fd_mount) {  // what fusermount3 would refuse, before the scan, by whose it is
    if (Status why = CheckFuseMount(mountpoint, config.fuse_options); !why.ok()) {
      if (why.code() == EACCES) return mountpoint_fail(why.message());
      return why.code() == EPERM ? usage(why.message()) : fail(why.message());
    }
  }
  // Warnings once SOURCE and MOUNTPOINT are known good: a mistake is said alone.
  for (const auto& w : warnings) TIERFS_LOG(kWarning, "{}", w);

  uint64_t fd_limit = RaiseFileLimit();
  uint64_t max_open = config.max_open_files ? config.max_open_files : fd_limit / 2;
  if (max_open + 64 > fd_limit) {
    return fail(fmt::format("max_open_files={} does not fit below the open-file limit {}", max_open,
                            fd_limit));
  }

  int err = 0;
  std::shared_ptr<Backend> posix = NewPosixBackend(source_open, &err);
  if (!posix) return source_fail(fmt::format("SOURCE '{}': {}", source, std::strerror(-err)));
  CountingBackend backend(posix);
  if (!posix->stable_inodes()) {
    TIERFS_LOG(kInfo,
               "SOURCE is a FUSE file system: its inode numbers may change, so files are "
               "identified by size, mtime and ctime only");
  }

  NotifyStatus(fmt::format("scanning {}", source));
  struct stat source_st {};
  ::stat(source_open.c_str(), &source_st);
  OpenOptions open_options;
  if (Status err = IndexPath(config, &open_options.index); !err.ok()) return fail(err.message());
  open_options.check = config.index_check;
  open_options.scan_threads = config.scan_threads;
  open_options.wait_s = config.index_wait;
  SourceIdentity identity{source, source_st.st_dev, source_st.st_ino};
  OpenReport opened;
  Result<std::unique_ptr<Namespace>> scanned =
      OpenNamespace(&backend, identity, open_options, &opened);
  for (const auto& note : opened.notes) TIERFS_LOG(kWarning, "{}", note);
  if (!scanned.ok()) return source_fail(scanned.status().message());
  std::unique_ptr<Namespace> ns = std::move(scanned).value();
  TIERFS_LOG(kInfo,
             "{}: {} files ({} bytes), {} directories, {} symlinks in {:.2f} s, {} metadata "
             "operations on SOURCE",
             opened.how, ns->file_count(), ns->total_file_bytes(), ns->dir_count(),
             ns->symlink_count(), opened.seconds, opened.meta_ops);
  if (ns->skipped_count() > 0) {
    TIERFS_LOG(kWarning, "{} entries skipped (special files or unreadable directories)",
               ns->skipped_count());
  }

  SourceReader reader(&backend, ns.get(), max_open);
  TieringConfig tiering = config.tiering;
  tiering.prefetch.mountpoint = fd_mount ? "" : mountpoint;
  tiering.source_id = fmt::format("{} ino {}", source, source_st.st_ino);
  // A daemon unmounted a moment ago may hold the tiers for up to its
  // shutdown_timeout (30 s by default) while it finishes its promotions.
  tiering.lock_wait_s = config.shutdown_timeout + 5;
  Result<std::unique_ptr<TieredStore>> opened_store =
      TieredStore::Open(tiering, ns.get(), &reader, source_st.st_dev);
  if (!opened_store.ok()) return fail(opened_store.status().message());
  std::unique_ptr<TieredStore> store = std::move(opened_store).value();
  const uid_t control_uid =
      config.control_uid >= 0 ? static_cast<uid_t>(config.control_uid) : ::getuid();
  const gid_t control_gid =
      config.control_gid >= 0 ? static_cast<gid_t>(config.control_gid) : ::getgid();
  FsContext ctx(ns.get(), &reader, store.get(), &backend.counters(),
                FsTimeouts{config.entry_timeout, config.attr_timeout}, control_uid, control_gid);
  ctx.set_check_access(fd_mount);
  ctx.set_identity(source, mountpoint);
  // A root daemon serving other users decides opens as SOURCE would for each.
  std::unique_ptr<SourcePermissions> permissions;
  const bool allow_other = std::find(config.fuse_options.begin(), config.fuse_options.end(),
                                     "allow_other") != config.fuse_options.end();
  const bool by_source = config.permissions == "source" ||
                         (config.permissions.empty() && ::geteuid() == 0 && allow_other);
  if (by_source) {
    if (::geteuid() != 0) {
      TIERFS_LOG(kWarning,
                 "permissions=source needs a root daemon: the snapshot's mode bits "
                 "decide opens");
    } else {
      permissions = std::make_unique<SourcePermissions>(
          &backend, ns.get(),
          std::chrono::milliseconds(static_cast<int64_t>(config.perm_ttl * 1000)));
      ctx.set_source_permissions(permissions.get());
      TIERFS_LOG(kInfo,
                 "opens are decided by SOURCE as each caller (permissions=source, answers kept "
                 "{})",
                 config.perm_ttl > 0 ? fmt::format("{} s", config.perm_ttl)
                                     : std::string("until revalidated"));
    }
  }
  ctx.set_readdir_mode(config.readdir == "plain"  ? ReaddirMode::kPlain
                       : config.readdir == "auto" ? ReaddirMode::kAuto
                                                  : ReaddirMode::kPlus);
  metrics_ctx = &ctx;
  ctx.passthrough().Configure(
      passthrough, passthrough == PassthroughWant::kAuto && no_passthrough.empty()
                       ? PassthroughNotPaying(*ns, store->chunks(), NodeMemory())
                       : no_passthrough);
  ctx.init_patch().WantPassthrough(ctx.passthrough().wanted());
  ctx.init_patch().SetMaxPages(MaxPagesLimit());
  if (ctx.passthrough().wanted() && store->chunks() != nullptr) {
    // The RAM tier keeps each file in a memory file that can be a backing
    // file, as many as the open-file limit leaves room for.
    const uint64_t spare = fd_limit > max_open + 1024 ? fd_limit - max_open - 1024 : 0;
    UseTierFiles(store->chunks(), &ctx.passthrough(), spare);
  }

  std::string opts = FuseOptionString(config, source);
  std::vector<std::string> argv_s = {"tierfs", "-o", opts};
  if (config.debug) argv_s.push_back("-d");
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  struct fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  struct fuse_session* se = fuse_session_new(&args, &TierFsOps(), sizeof(fuse_lowlevel_ops), &ctx);
  fuse_opt_free_args(&args);
  if (se == nullptr) return fail("cannot create the FUSE session (see the message above)");
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    return fail("cannot install signal handlers");
  }
  const std::string mount_on = opened_as.active() ? opened_as.mount_path() : mountpoint;
  if (std::string said; MountSaying(se, mount_on, &said) != 0) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    // libfuse's or fusermount3's own words, or else what a check finds now.
    if (!said.empty()) return fail(fmt::format("cannot mount on '{}': {}", mountpoint, said));
    if (Status why = CheckFuseMount(mountpoint, config.fuse_options); !why.ok()) {
      return fail(why.message());
    }
    return fail(fmt::format("cannot mount on '{}' (libfuse gave no reason)", mountpoint));
  }
  if (int err = NegotiateParallelDirops<FsContext>(se); err != 0) {
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return fail(fmt::format("cannot set up the FUSE session's I/O: {}", std::strerror(-err)));
  }
  ctx.set_session(se);
  if (ctx.passthrough().wanted()) {
    // The INIT exchange now, before the parent returns: whether the kernel
    // takes passthrough is known (and passthrough=on can still refuse).
    AnswerInit(se);
    if (passthrough == PassthroughWant::kOn && !ctx.passthrough().active()) {
      fuse_session_unmount(se);
      fuse_remove_signal_handlers(se);
      fuse_session_destroy(se);
      return usage(
          fmt::format("passthrough=on is impossible here: {}", ctx.passthrough().why_not()));
    }
  }
  TIERFS_LOG(kInfo, "mounted {} on {}{}", source, mountpoint,
             ctx.passthrough().active()
                 ? " (passthrough for files wholly in one tier file)"
                 : fmt::format(" (passthrough off: {})", ctx.passthrough().why_not()));
  ShutdownGuard guard(se, config.shutdown_timeout);
  if (opened_as.active()) {
    guard.set_unmount([&] { return opened_as.Unmount(fuse_session_fd(se)); });
  }
  if (!config.foreground) {
    // No thread runs yet (the scan's have been joined, promotion threads start
    // later), so forking is safe.
    UseDetachedLog(config, mountpoint);
    fuse_daemonize(0);
    TIERFS_LOG(kInfo, "detached: serving {} on {} (pid {})", source, mountpoint, ::getpid());
  } else if (!config.log_to.empty() && config.log_to[0] == '/') {
    if (int err = Log::UseFile(config.log_to); err < 0) {
      TIERFS_LOG(kWarning, "log={}: {}; logging to stderr", config.log_to, std::strerror(-err));
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

  store->Start();  // threads only now: they would not survive the fork
  std::unique_ptr<PeerService> peer_service = StartPeerService(store.get(), ns.get());
  ctx.set_peer_service(peer_service.get());
  if (metrics) metrics->Start();
  guard.Start();
  struct fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, config.threads);
  fuse_loop_cfg_set_idle_threads(loop, std::min(config.threads, 16u));
  fuse_loop_cfg_set_clone_fd(loop, 1);
  std::thread tune([&] {
    SetReadAhead(opened_as.active() ? opened_as.mounted_path() : mountpoint,
                 fd_mount ? 0 : config.read_ahead_kb, ctx.init_patch());
  });
  NotifyReady(fmt::format("serving {} on {} ({} files)", source, mountpoint, ns->file_count()));
  int rc = fuse_session_loop_mt(se, loop);
  NotifyStopping("unmounting: stopping promotions");
  tune.join();
  fuse_loop_cfg_destroy(loop);
  fuse_remove_signal_handlers(se);
  FinishPromotions(store.get(), metrics.get(), peer_service.get());
  guard.Finish();
  // A mount on an opened directory: libfuse's unmount would name /proc/self/fd/N.
  if (!opened_as.active() || !opened_as.Unmount(fuse_session_fd(se))) fuse_session_unmount(se);
  fuse_session_destroy(se);
  TIERFS_LOG(kInfo, "unmounted {}", mountpoint);
  // The loop returns the signal number when SIGINT/SIGTERM/SIGHUP ended it:
  // that is a clean, requested unmount.
  bool clean = rc == 0 || rc == SIGINT || rc == SIGTERM || rc == SIGHUP;
  if (!clean) TIERFS_LOG(kError, "the FUSE loop failed: {}", std::strerror(rc < 0 ? -rc : rc));
  return clean ? 0 : 1;
}

}  // namespace tierfs
