#include "tiering/namespace/namespace_freshness.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>

#include "tiering/base/mutex.h"
#include "tiering/base/parallel_for.h"
#include "tiering/namespace/file_identity.h"
#include "tiering/namespace/namespace_open.h"

namespace tierfs {

const char* IdentityChange(const Node& n, const struct stat& st) {
  if ((st.st_mode & S_IFMT) != (n.mode & S_IFMT)) return "is no longer of the same type";
  if (S_ISREG(n.mode)) return FileIdentity::Of(n).ChangeIn(FileIdentity::Of(st));
  if (!S_ISDIR(n.mode)) return nullptr;
  if (Nanos(st.st_mtim) != n.mtime_ns || Nanos(st.st_ctim) != n.ctime_ns) {
    return "was modified (mtime or ctime)";
  }
  return nullptr;
}

FreshnessReport CheckFreshness(Backend* backend, const Namespace& ns, unsigned threads,
                               size_t max_samples) {
  const auto start = std::chrono::steady_clock::now();
  FreshnessReport report;
  std::vector<NodeId> todo;
  for (NodeId id = 0; id < ns.size(); ++id) {
    const uint32_t mode = ns.node(id).mode;
    if (S_ISDIR(mode) || S_ISREG(mode)) todo.push_back(id);
    report.checked_dirs += S_ISDIR(mode);
    report.checked_files += S_ISREG(mode);
  }
  std::atomic<uint64_t> changed_files{0}, changed_dirs{0}, missing{0}, errors{0};
  Mutex samples_mu;  // guards samples: taken only for the first few changes
  std::atomic<size_t> sampled{0};
  std::vector<std::string> samples;
  auto note = [&](NodeId id, const char* why) {
    if (sampled.fetch_add(1, std::memory_order_relaxed) >= max_samples) return;
    std::string line = fmt::format("{}: {}", id == kRootNode ? "." : ns.Path(id), why);
    MutexLock lock(samples_mu);
    samples.push_back(std::move(line));
  };
  auto check = [&](size_t i) {
    const NodeId id = todo[i];
    const Node& n = ns.node(id);
    struct stat st;
    const int err = backend->stat(ns.Path(id), &st);
    if (err == -ENOENT || err == -ENOTDIR) {
      missing.fetch_add(1, std::memory_order_relaxed);
      note(id, "is gone");
    } else if (err < 0) {
      errors.fetch_add(1, std::memory_order_relaxed);
    } else if (const char* why = IdentityChange(n, st)) {
      (S_ISDIR(n.mode) ? changed_dirs : changed_files).fetch_add(1, std::memory_order_relaxed);
      note(id, why);
    }
  };
  if (threads == 0) threads = kValidateThreads;
  ParallelFor(todo.size(), threads, check);
  report.changed_files = changed_files;
  report.changed_dirs = changed_dirs;
  report.missing = missing;
  report.errors = errors;
  report.samples = std::move(samples);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

std::string FreshnessJson(const FreshnessReport& r) {
  return fmt::format(
      "{{\"checked_files\":{},\"checked_dirs\":{},\"changed_files\":{},\"changed_dirs\":{},"
      "\"missing\":{},\"errors\":{},\"seconds\":{:.3f}}}\n",
      r.checked_files, r.checked_dirs, r.changed_files, r.changed_dirs, r.missing, r.errors,
      r.seconds);
}

}  // namespace tierfs
