#include "tiering/namespace/namespace_open.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tiering/base/log.h"
#include "tiering/base/mutex.h"
#include "tiering/base/parallel_for.h"
#include "tiering/namespace/namespace_freshness.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;

// A builder touches its lock every kLockBeat; a lock not touched for
// kLockStale (its builder died, on any node), or dated in the future, is
// not waited for.
constexpr std::chrono::seconds kLockBeat(5);
constexpr double kLockStale = 30;

// INDEX.lock: held by the node that builds INDEX, touched every kLockBeat
// while held. Removed by the destructor.
class BuildLock {
 public:
  explicit BuildLock(FileIo* io) : io_(io) {}
  // Tries to create the lock; false if another builder holds it (or it
  // cannot be created: then *error says why and nobody will build).
  bool TryAcquire(const std::string& index, Status* error) {
    path_ = index + ".lock";
    std::unique_ptr<LocalFile> file;
    int err = io_->open(path_, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600, &file);
    if (err < 0) {
      if (err != -EEXIST)
        *error = Status::FromErrno(-err, fmt::format("cannot create '{}'", path_));
      return false;
    }
    char host[256] = "?";
    ::gethostname(host, sizeof(host) - 1);
    std::string who = fmt::format("{} {}\n", host, ::getpid());
    (void)WriteAll(file.get(), who.data(), who.size());
    held_ = true;
    beat_ = std::thread([this, f = std::move(file)] {
      MutexLock lock(mu_);
      while (!cv_.WaitFor(mu_, kLockBeat, [this]() REQUIRES(mu_) { return done_; })) {
        (void)f->touch();
      }
      (void)f->close();
    });
    return true;
  }
  ~BuildLock() {
    if (!held_) return;
    {
      MutexLock lock(mu_);
      done_ = true;
    }
    cv_.NotifyAll();
    beat_.join();
    io_->unlink(path_);
  }

 private:
  FileIo* const io_;
  std::string path_;
  bool held_ = false;
  std::thread beat_;
  Mutex mu_;  // guards done_. A leaf, held by beat_ across its touch of the file.
  CondVar cv_;
  bool done_ GUARDED_BY(mu_) = false;
};

// Whether `path` exists (without following a final symlink); its age in s.
bool Exists(FileIo* io, const std::string& path, double* age_s) {
  struct stat st;
  if (io->lstat(path, &st) != 0) return false;
  *age_s = static_cast<double>(::time(nullptr) - st.st_mtime);
  return true;
}

// Why lock `path` is not one to wait for ("" if it is): another user's (a
// name in a shared directory can be taken first by anyone), not a regular
// file, dated in the future, or not touched for kLockStale.
std::string UnworthyLock(FileIo* io, const std::string& path) {
  struct stat st;
  if (io->lstat(path, &st) != 0) return "";
  if (st.st_uid != ::geteuid()) {
    return fmt::format("it belongs to uid {}, not to this daemon's user (planted?)", st.st_uid);
  }
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  double age = static_cast<double>(::time(nullptr) - st.st_mtime);
  if (age < -60) return fmt::format("it is dated {:.0f} s in the future", -age);
  if (age > kLockStale) return fmt::format("its builder stopped touching it {:.0f} s ago", age);
  return "";
}

// Whether lock file `path` was left by a builder on this host that is gone
// (its "host pid" line names a process that no longer exists).
bool LockOfDeadProcess(FileIo* io, const std::string& path) {
  std::unique_ptr<LocalFile> file;
  if (io->open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, &file) < 0) return false;
  char buf[320] = {};
  ssize_t n = file->pread(buf, sizeof(buf) - 1, 0);
  file->close();
  if (n <= 0) return false;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string_view text(buf, static_cast<size_t>(n));
  size_t space = text.find(' ');
  if (space == std::string_view::npos || text.substr(0, space) != host) return false;
  long pid = std::strtol(buf + space + 1, nullptr, 10);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

std::vector<NodeId> ChangedDirectories(Backend* backend, const Namespace& ns, unsigned threads,
                                       int64_t racy_after_ns, uint64_t* stats) {
  std::vector<NodeId> dirs;
  for (NodeId id = 0; id < ns.size(); ++id) {
    if (S_ISDIR(ns.node(id).mode)) dirs.push_back(id);
  }
  std::vector<char> changed(dirs.size(), 0);
  // scan_threads=auto: a stat per directory is over too soon to tune (1,001
  // for ImageNet); as many in flight as the scan's tuning found at full scale.
  if (threads == 0) threads = kValidateThreads;
  ParallelFor(dirs.size(), threads, [&](size_t i) {
    struct stat st;
    const Node& n = ns.node(dirs[i]);
    const bool same = backend->stat(ns.Path(dirs[i]), &st) == 0 &&
                      IdentityChange(n, st) == nullptr && n.mtime_ns < racy_after_ns &&
                      n.ctime_ns < racy_after_ns;
    changed[i] = !same;
  });
  *stats += dirs.size();
  std::vector<NodeId> out;
  for (size_t i = 0; i < dirs.size(); ++i) {
    if (changed[i]) out.push_back(dirs[i]);
  }
  return out;
}

Status CheckPrivateDirectory(const std::string& dir) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return Status::FromErrno(errno, fmt::format("'{}'", dir));
  if (!S_ISDIR(st.st_mode)) {
    return Status::Error(ENOTDIR, fmt::format("'{}' is not a directory", dir));
  }
  if (st.st_uid != ::geteuid()) {
    return Status::Error(EACCES, fmt::format("'{}' belongs to uid {}, not to this daemon's uid {}",
                                             dir, st.st_uid, ::geteuid()));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::Error(
        EACCES, fmt::format("'{}' is writable by others (mode {:o})", dir, st.st_mode & 07777));
  }
  return Status::Ok();
}

Result<std::unique_ptr<Namespace>> OpenNamespace(Backend* backend, const SourceIdentity& source,
                                                 const OpenOptions& options, OpenReport* report,
                                                 ScanReport* live) {
  using Opened = Result<std::unique_ptr<Namespace>>;
  const auto start = Clock::now();
  const int64_t created = RealtimeNanos();
  FileIo* const io = options.io ? options.io.get() : DefaultFileIo().get();
  ScanReport local;
  ScanReport& scan = live ? *live : local;
  auto finish = [&](std::unique_ptr<Namespace> ns, std::string how) -> Opened {
    if (const unsigned width = scan.width; width > 0) {
      how += scan.tune_steps > 0 ? fmt::format(", {} requests in flight (tuned; at most {})", width,
                                               scan.peak_width.load())
                                 : fmt::format(", {} requests in flight", width);
    }
    report->how = std::move(how);
    report->meta_ops = scan.meta_ops();
    report->seconds = Since(start);
    return ns;
  };
  auto full_scan = [&] {
    report->scanned = true;
    return ScanNamespace(backend, {options.scan_threads}, &scan);
  };
  // Saves `ns` and maps the saved copy in its place (file-backed pages
  // instead of heap). Keeps `ns` when the index cannot be written.
  auto save = [&](std::unique_ptr<Namespace> ns) {
    if (!options.write) return ns;
    report->write_error = WriteIndex(*ns, source, created, options.index, io);
    if (!report->write_error.ok()) {
      report->notes.push_back(report->write_error.message() +
                              "; the index on disk stays as it was");
      return ns;
    }
    report->written = true;
    Opened mapped = LoadIndex(options.index, &source, nullptr, io);
    if (mapped.ok()) return std::move(mapped).value();
    report->notes.push_back(mapped.status().message());
    return ns;
  };

  if (options.index.empty()) {
    Opened ns = full_scan();
    if (!ns.ok()) return ns;
    return finish(std::move(ns).value(), "scanned (no index)");
  }
  std::unique_ptr<Namespace> saved;
  IndexInfo info;
  // Loads the index into `saved`, or says why not in report->load_error.
  auto load = [&] {
    Opened loaded = LoadIndex(options.index, &source, &info, io);
    report->load_error = loaded.status();
    if (loaded.ok()) saved = std::move(loaded).value();
  };
  if (options.check != IndexCheck::kFull) {
    load();
    if (!saved) {
      // Another node may be building it: wait for its lock to go, then retry.
      BuildLock lock(io);
      Status& lock_error = report->lock_error;
      double age = 0;
      if (lock.TryAcquire(options.index, &lock_error)) {
        load();  // written meanwhile?
      } else if (lock_error.ok()) {
        TIERFS_LOG(kInfo, "index '{}' is being built elsewhere: waiting up to {} s", options.index,
                   options.wait_s);
        while (Exists(io, options.index + ".lock", &age) && age < options.wait_s &&
               Since(start) < options.wait_s) {
          if (std::string why = UnworthyLock(io, options.index + ".lock"); !why.empty()) {
            report->notes.push_back(
                fmt::format("index '{}': its lock is not waited for: {}", options.index, why));
            if (why.find("uid") == std::string::npos) {  // ours: break it and build here
              io->unlink(options.index + ".lock");
              lock.TryAcquire(options.index, &lock_error);
            }
            break;
          }
          if (LockOfDeadProcess(io, options.index + ".lock")) {
            report->notes.push_back(fmt::format(
                "index '{}': its builder on this host died; removing its lock", options.index));
            io->unlink(options.index + ".lock");
            lock.TryAcquire(options.index, &lock_error);  // build it here; others wait for us
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        if (Exists(io, options.index + ".lock", &age) &&
            UnworthyLock(io, options.index + ".lock").empty()) {
          report->notes.push_back(fmt::format(
              "index '{}' still locked after {:.0f} s (lock {:.0f} s old): scanning here",
              options.index, Since(start), age));
          if (age >= options.wait_s) io->unlink(options.index + ".lock");  // stale
        }
        load();
      }
      if (!saved) {
        if (!lock_error.ok()) report->notes.push_back(lock_error.message());
        if (report->load_error.code() != ENOENT) {
          report->notes.push_back(report->load_error.message() + "; scanning SOURCE instead");
        }
        Opened ns = full_scan();
        if (!ns.ok()) return ns;
        std::unique_ptr<Namespace> scanned = save(std::move(ns).value());
        return finish(std::move(scanned), report->written ? "scanned, index written" : "scanned");
      }
    }
  }
  if (!saved) {  // check=full: a scan, saved for the next mount
    BuildLock lock(io);
    lock.TryAcquire(options.index, &report->lock_error);
    Opened ns = full_scan();
    if (!ns.ok()) return ns;
    std::unique_ptr<Namespace> scanned = save(std::move(ns).value());
    return finish(std::move(scanned), report->written ? "scanned (index_check=full), index written"
                                                      : "scanned (index_check=full)");
  }
  report->from_index = true;
  if (options.check == IndexCheck::kNone) {
    return finish(std::move(saved), "index loaded, not checked (index_check=none)");
  }
  uint64_t stats = 0;
  const int64_t racy_after = info.created_ns - options.racy_margin_ns;
  std::vector<NodeId> changed =
      ChangedDirectories(backend, *saved, options.scan_threads, racy_after, &stats);
  scan.stats += stats;
  report->dirs_checked = saved->dir_count();
  report->dirs_changed = changed.size();
  if (changed.empty()) {
    return finish(std::move(saved),
                  fmt::format("index loaded, {} directories unchanged", saved->dir_count()));
  }
  std::vector<bool> flags(saved->size(), false);
  for (NodeId id : changed) flags[id] = true;
  report->scanned = true;
  BuildLock lock(io);
  // Best effort: writing is atomic anyway.
  lock.TryAcquire(options.index, &report->lock_error);
  Opened rescanned =
      ScanNamespace(backend, {options.scan_threads, saved.get(), &flags, racy_after}, &scan);
  if (!rescanned.ok()) return rescanned;
  saved.reset();
  std::unique_ptr<Namespace> ns = save(std::move(rescanned).value());
  return finish(
      std::move(ns),
      fmt::format("index loaded, {} of {} directories changed and listed again{}", changed.size(),
                  report->dirs_checked, report->written ? ", index written" : ""));
}

}  // namespace tierfs
