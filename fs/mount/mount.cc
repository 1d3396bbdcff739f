#include "fs/mount/mount.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>

#include "fs/config/config_checks.h"
#include "fs/fuse/passthrough_backing.h"
#include "fs/mount/inherited_listener.h"
#include "fs/mount/mount_checks.h"
#include "fs/mount/scan_progress.h"
#include "fs/mount/service_notify.h"
#include "tiering/base/log.h"
#include "tiering/base/units.h"
#include "tiering/namespace/namespace_open.h"

namespace tierfs {
namespace {

// A message of the mount's in lines of at most 100 columns on a terminal
// ("tierfs: warning: " first), the further lines indented by two spaces.
void LogWrapped(LogLevel level, const std::string& text) {
  if (!Log::Enabled(level)) return;
  constexpr size_t kRoom = 100 - sizeof("tierfs: warning: ") + 1;
  bool first = true;
  for (const std::string& line : WrapWords(text, kRoom - 2)) {
    Log::Write(level, first ? line : "  " + line);
    first = false;
  }
}

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

// The kernel's cap on a FUSE request's pages (/proc/sys/fs/fuse/max_pages_limit,
// Linux 6.13+; 256 before, libfuse's own 1 MiB), at most what max_pages holds.
uint16_t MaxPagesLimit() {
  std::ifstream in("/proc/sys/fs/fuse/max_pages_limit");
  unsigned limit = 0;
  if (!(in >> limit) || limit == 0) return 0;
  return static_cast<uint16_t>(std::min(limit, 65535u));
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

// Whether SOURCE, asked as each caller, decides opens (a root daemon
// serving other users, by default).
bool PermissionsBySource(const MountConfig& config) {
  const bool allow_other = std::find(config.fuse_options.begin(), config.fuse_options.end(),
                                     "allow_other") != config.fuse_options.end();
  return config.permissions == PermissionsBy::kSource ||
         (config.permissions == PermissionsBy::kDefault && ::geteuid() == 0 && allow_other);
}

}  // namespace

TierfsMount::~TierfsMount() {
  if (peer_listener_ >= 0) ::close(peer_listener_);  // no peer service took it
}

MountFailure TierfsMount::Make() {
  if (MountFailure f = CheckCommandLine()) return f;
  if (MountFailure f = OpenSourceAndMountpoint()) return f;
  // Warnings once SOURCE and MOUNTPOINT are known good: a mistake is said alone.
  for (const auto& w : warnings_) TIERFS_LOG(kWarning, "{}", w);
  if (MountFailure f = ScanSource()) return f;
  if (MountFailure f = OpenStore()) return f;
  ConfigureContext();
  return MountFuse();
}

// A bad command line is said before SOURCE is touched (exit 2, at once),
// and so is a tier or index path it names that cannot be used (exit 5);
// the metrics port too is bound now, served once mounted.
MountFailure TierfsMount::CheckCommandLine() {
  if (MountFailure f = Blamed(Blame::kCommandLine, CheckBeforeScan(config_, &warnings_))) return f;
  if (Status why = CheckNamedPaths(config_, &warnings_); !why.ok()) {
    return Blamed(PathBlame(why.code()), why);
  }
  no_passthrough_ = PassthroughUnavailable(config_.passthrough);
  if (config_.passthrough == PassthroughWant::kOn && !no_passthrough_.empty()) {
    return {Blame::kCommandLine,
            fmt::format("passthrough=on is impossible here: {}", no_passthrough_)};
  }
  if (config_.metrics.empty()) return {};
  Result<std::unique_ptr<MetricsServer>> bound = MetricsServer::Bind(
      config_.metrics, [this] { return stats_ ? stats_->Prometheus() : std::string(); });
  if (!bound.ok()) return Blamed(Blame::kCommandLine, bound.status());
  metrics_ = std::move(bound).value();
  return {};
}

MountFailure TierfsMount::OpenSourceAndMountpoint() {
  if (config_.open_as_uid >= 0) {
    OpenAsFailure failed = OpenAsFailure::kNone;
    Status err =
        OpenAs(static_cast<uid_t>(config_.open_as_uid), static_cast<gid_t>(config_.open_as_gid),
               config_.source, config_.mountpoint, &opened_as_, &failed);
    if (failed == OpenAsFailure::kSource) return SourceFailure(err);
    if (failed == OpenAsFailure::kMountpoint) return Blamed(Blame::kMountpoint, err);
    if (MountFailure f = Blamed(::geteuid() == 0 ? Blame::kMachine : Blame::kCommandLine, err)) {
      return f;
    }
    source_path_ = opened_as_.source_shown();
  } else if (Status err = CheckSource(config_.source, &source_path_); !err.ok()) {
    return SourceFailure(err);
  }
  source_open_ = opened_as_.active() ? opened_as_.source_path() : source_path_;
  fd_mount_ = config_.mountpoint.rfind("/dev/fd/", 0) == 0;
  if (fd_mount_) {
    mountpoint_ = config_.mountpoint;
    return {};
  }
  // SOURCE reached as (or inside) MOUNTPOINT is SOURCE's failure: its path
  // led there (a dataset symlink pointing at the mount point, say).
  if (opened_as_.active()) {
    if (Status err = opened_as_.CheckSourceApart(); !err.ok()) return Blamed(Blame::kSource, err);
    if (Status err = opened_as_.CheckMountpoint(config_.nonempty); !err.ok()) {
      return Blamed(Blame::kMountpoint, err);
    }
    mountpoint_ = opened_as_.mount_shown();
  } else if (Status err = CheckSourceApart(source_path_, config_.mountpoint); !err.ok()) {
    return Blamed(Blame::kSource, err);
  } else if (Status err = CheckMountpoint(config_.mountpoint, config_.nonempty, &mountpoint_);
             !err.ok()) {
    return Blamed(Blame::kMountpoint, err);
  }
  // What fusermount3 would refuse, before the scan, by whose it is.
  Status why = CheckFuseMount(mountpoint_, config_.fuse_options);
  const Blame blame = why.code() == EACCES  ? Blame::kMountpoint
                      : why.code() == EPERM ? Blame::kCommandLine
                                            : Blame::kMachine;
  return Blamed(blame, why);
}

MountFailure TierfsMount::ScanSource() {
  fd_limit_ = RaiseFileLimit();
  max_open_ = config_.max_open_files ? config_.max_open_files : fd_limit_ / 2;
  if (max_open_ + 64 > fd_limit_) {
    return {Blame::kMachine, fmt::format("max_open_files={} does not fit below the open-file "
                                         "limit {}",
                                         max_open_, fd_limit_)};
  }
  Result<std::unique_ptr<Backend>> posix = NewPosixBackend(source_open_);
  if (!posix.ok()) {
    return {SourceBlame(posix.status().code()),
            fmt::format("SOURCE '{}': {}", source_path_, std::strerror(posix.status().code()))};
  }
  posix_ = std::move(posix).value();
  backend_ = std::make_unique<CountingBackend>(posix_);
  if (!posix_->stable_inodes()) {
    TIERFS_LOG(kInfo,
               "SOURCE is a FUSE file system: its inode numbers may change, so files are "
               "identified by size, mtime and ctime only");
  }
  NotifyStatus(fmt::format("scanning {}", source_path_));
  ::stat(source_open_.c_str(), &source_st_);
  OpenOptions open_options;
  if (MountFailure f = Blamed(Blame::kCommandLine, IndexPath(config_, &open_options.index))) {
    return f;
  }
  open_options.check = config_.index_check;
  open_options.scan_threads = config_.scan_threads;
  open_options.wait_s = config_.index_wait;
  SourceIdentity identity{source_path_, source_st_.st_dev, source_st_.st_ino};
  OpenReport opened;
  ScanReport scan;
  Result<std::unique_ptr<Namespace>> scanned = [&] {
    // On a terminal, what the scan has done so far (a PFS may take minutes).
    ScanProgress progress(&scan, "scanning SOURCE", Log::Enabled(kInfo));
    return OpenNamespace(backend_.get(), identity, open_options, &opened, &scan);
  }();
  for (const auto& note : opened.notes) TIERFS_LOG(kWarning, "{}", note);
  if (!scanned.ok()) return SourceFailure(scanned.status());
  ns_ = std::move(scanned).value();
  // The scan's own operations: `tierfs stat` counts these and every one since.
  LogWrapped(kInfo,
             fmt::format("{} in {:.2f} s: {} ({} bytes), {}, {}; {} metadata operations "
                         "on SOURCE for it",
                         opened.how, opened.seconds, Counted(ns_->file_count(), "file"),
                         Grouped(ns_->total_file_bytes()), Counted(ns_->dir_count(), "directory"),
                         Counted(ns_->symlink_count(), "symlink"), Grouped(opened.meta_ops)));
  if (ns_->skipped_count() > 0) {
    TIERFS_LOG(kWarning, "{} skipped (special files or unreadable directories)",
               Counted(ns_->skipped_count(), "entry"));
  }
  return {};
}

MountFailure TierfsMount::OpenStore() {
  reader_ = std::make_unique<SourceReader>(backend_.get(), ns_.get(), max_open_);
  TieringConfig tiering = config_.tiering;
  tiering.prefetch.mountpoint = fd_mount_ ? "" : mountpoint_;
  tiering.prefetch.shared_control = config_.control_any;
  tiering.source_id = fmt::format("{} ino {}", source_path_, source_st_.st_ino);
  // A daemon unmounted a moment ago may hold the tiers for up to its
  // shutdown_timeout (30 s by default) while it finishes its promotions.
  tiering.lock_wait_s = config_.shutdown_timeout + 5;
  Result<std::unique_ptr<Engine>> opened =
      Engine::Open(tiering, ns_.get(), reader_.get(), source_st_.st_dev);
  // Its tiers' directories failing is theirs (exit 5), unless the device is.
  if (!opened.ok()) return Blamed(PathBlame(opened.status().code()), opened.status());
  engine_ = std::move(opened).value();
  if (engine_->peers() != nullptr) peer_listener_ = TakeInheritedListener();
  return {};
}

// The handlers' context: who may steer the mount, who decides opens, how
// directories are listed, passthrough.
void TierfsMount::ConfigureContext() {
  FsParts parts;
  parts.ns = ns_.get();
  parts.reader = reader_.get();
  parts.engine = engine_.get();
  parts.source = &backend_->counters();
  parts.timeouts = FsTimeouts{config_.entry_timeout, config_.attr_timeout};
  parts.owner = config_.control_uid >= 0 ? static_cast<uid_t>(config_.control_uid) : ::getuid();
  parts.group = config_.control_gid >= 0 ? static_cast<gid_t>(config_.control_gid) : ::getgid();
  parts.anyone_hints = config_.control_any;
  parts.readdir = config_.readdir;
  parts.check_access = fd_mount_;
  parts.changes_backend = backend_.get();
  parts.changes_threads = config_.scan_threads;
  parts.stats = [this](uid_t reader) { return stats_->Json(reader); };
  // A root daemon serving other users decides opens as SOURCE would for each.
  if (PermissionsBySource(config_)) {
    if (::geteuid() != 0) {
      TIERFS_LOG(kWarning,
                 "permissions=source needs a root daemon: the snapshot's mode bits "
                 "decide opens");
    } else {
      permissions_ = std::make_unique<SourcePermissions>(
          backend_.get(), ns_.get(),
          std::chrono::milliseconds(static_cast<int64_t>(config_.perm_ttl * 1000)));
      parts.source_permissions = permissions_.get();
      TIERFS_LOG(kInfo,
                 "opens are decided by SOURCE as each caller (permissions=source, answers kept "
                 "{})",
                 config_.perm_ttl > 0 ? fmt::format("{} s", config_.perm_ttl)
                                      : std::string("until revalidated"));
    }
  }
  ctx_ = std::make_unique<FsContext>(std::move(parts));
  MountStatsParts figures;
  figures.fs = ctx_.get();
  figures.ns = ns_.get();
  figures.source = &backend_->counters();
  figures.reader = reader_.get();
  figures.permissions = permissions_.get();
  figures.engine = engine_.get();
  figures.source_path = source_path_;
  figures.mount_path = mountpoint_;
  stats_ = std::make_unique<MountStats>(std::move(figures));
  ctx_->passthrough().Configure(
      config_.passthrough, config_.passthrough == PassthroughWant::kAuto && no_passthrough_.empty()
                               ? PassthroughNotPaying(*ns_, engine_->chunks(), NodeMemory())
                               : no_passthrough_);
  ctx_->init_patch().WantPassthrough(ctx_->passthrough().wanted());
  ctx_->init_patch().SetMaxPages(MaxPagesLimit());
  if (ctx_->passthrough().wanted() && engine_->chunks() != nullptr) {
    // The RAM tier keeps each file in a memory file that can be a backing
    // file, as many as the open-file limit leaves room for.
    UseTierFiles(engine_->chunks(), &ctx_->passthrough(),
                 MemoryFileBudget(fd_limit_, max_open_, *posix_, engine_->chunks()->tiers()));
  }
}

MountFailure TierfsMount::MountFuse() {
  Result<std::unique_ptr<FuseSession>> created = FuseSession::Create(
      FuseOptionString(config_, source_path_), config_.debug, TierFsOps(), ctx_.get());
  if (!created.ok()) return Blamed(Blame::kMachine, created.status());
  session_ = std::move(created).value();
  if (opened_as_.active()) {
    // A mount on an opened directory: libfuse's unmount would name /proc/self/fd/N.
    session_->set_unmount([this](int fuse_fd) { return opened_as_.Unmount(fuse_fd); });
  }
  if (Status said = session_->Mount(opened_as_.active() ? opened_as_.mount_path() : mountpoint_);
      !said.ok()) {
    // libfuse's or fusermount3's own words, or else what a check finds now.
    if (!said.message().empty()) {
      return {Blame::kMachine,
              fmt::format("cannot mount on '{}': {}", mountpoint_, said.message())};
    }
    const Status now = CheckFuseMount(mountpoint_, config_.fuse_options);
    if (!now.ok()) return Blamed(Blame::kMachine, now);
    return {Blame::kMachine,
            fmt::format("cannot mount on '{}' (libfuse gave no reason)", mountpoint_)};
  }
  if (int err = InstallReplyPatch<FsContext>(session_->get()); err != 0) {
    return {Blame::kMachine,
            fmt::format("cannot set up the FUSE session's I/O: {}", std::strerror(-err))};
  }
  ctx_->set_session(session_->get());
  if (ctx_->passthrough().wanted()) {
    // The INIT exchange now, before the parent returns: whether the kernel
    // takes passthrough is known (and passthrough=on can still refuse).
    session_->AnswerInit();
    if (config_.passthrough == PassthroughWant::kOn && !ctx_->passthrough().active()) {
      return {Blame::kCommandLine,
              fmt::format("passthrough=on is impossible here: {}", ctx_->passthrough().why_not())};
    }
  }
  TIERFS_LOG(kInfo, "mounted {} on {}", source_path_, mountpoint_);
  LogWrapped(kInfo, ctx_->passthrough().active()
                        ? "passthrough on: the kernel reads files wholly in one tier file itself"
                        : fmt::format("passthrough off: {}", ctx_->passthrough().why_not()));
  return {};
}

}  // namespace tierfs
