#include "fs/mount/scan_progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "tiering/base/units.h"

namespace tierfs {

ScanProgress::ScanProgress(const ScanReport* scan, std::string label, bool enabled)
    : scan_(scan), label_(std::move(label)) {
  if (enabled && ::isatty(STDERR_FILENO) == 1) thread_ = std::thread([this] { Run(); });
}

ScanProgress::~ScanProgress() {
  if (!thread_.joinable()) return;
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
  std::fputs("\r\033[K", stderr);
}

std::string ScanProgress::Line(const std::string& label, const ScanReport& scan, double seconds) {
  const uint64_t entries = scan.entries.load();
  const uint64_t reused = scan.dirs_reused.load();
  return fmt::format("{}: {:.1f} s, {} listed{}, {} ({}/s), {} metadata operations", label, seconds,
                     Counted(scan.dirs_listed.load(), "directory"),
                     reused ? fmt::format(" ({} from the index)", Grouped(reused)) : "",
                     Counted(entries, "entry"),
                     Grouped(static_cast<uint64_t>(seconds > 0 ? entries / seconds : 0.0)),
                     Grouped(scan.meta_ops()));
}

void ScanProgress::Run() {
  const auto start = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  while (
      !cv_.WaitFor(mu_, std::chrono::milliseconds(250), [this]() REQUIRES(mu_) { return stop_; })) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "\r\033[K%s", Line(label_, *scan_, s).c_str());
    std::fflush(stderr);
  }
}

}  // namespace tierfs
