// tierfs stage: asks the daemon to promote paths now (`.tierfs/stage`) and
// follows the stats' "prefetch.stage" counters until every file asked for is
// resident or failed (each ask settled). Status 0 only when every file asked
// for is resident; else 1, saying how many are not and why, by reason.
// Ctrl-C stops the watching (exit 130), not the staging.
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "prefetch/planners/stage_planner.h"
#include "tools/tierfs/commands.h"

namespace tierfs::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) { g_interrupted.store(true); }

struct StageCounters {
  uint64_t requested_files = 0, requested_bytes = 0, done_files = 0, done_bytes = 0,
           failed_files = 0;
  // Every file named (repeats too), those resident already when named, and
  // the bytes staging made resident since (0 from a daemon that does not say).
  uint64_t named_files = 0, resident_when_named_files = 0, made_resident_bytes = 0;
  bool counts_named = false;
  // Asks (each naming of a file), those ended resident, and failed by reason
  // (a daemon that settles asks says asked_files).
  uint64_t asked_files = 0, asked_resident_files = 0, asked_failed_files = 0;
  std::array<uint64_t, StagePlanner::kFailures> failed_by{};
  bool counts_asks = false;

  static StageCounters From(const JsonValue& stats) {
    const JsonValue* s = stats.Find("prefetch.stage");
    if (!s) return {};
    StageCounters c{
        s->Uint("requested_files"),
        s->Uint("requested_bytes"),
        s->Uint("done_files"),
        s->Uint("done_bytes"),
        s->Member("not_resident_files") ? s->Uint("not_resident_files") : s->Uint("failed_files"),
        s->Uint("named_files"),
        s->Uint("resident_when_named_files"),
        s->Uint("made_resident_bytes"),
        s->Member("named_files") != nullptr};
    c.counts_asks = s->Member("asked_files") != nullptr;
    c.asked_files = s->Uint("asked_files");
    c.asked_resident_files = s->Uint("asked_resident_files");
    c.asked_failed_files = c.counts_asks ? s->Uint("failed_files") : 0;
    for (size_t f = 0; f < StagePlanner::kFailures; ++f) {
      c.failed_by[f] = s->Uint(fmt::format(
          "failed_{}_files", StagePlanner::FailureName(static_cast<StagePlanner::Failure>(f))));
    }
    return c;
  }
  // Every file asked for since `before` is resident or failed.
  bool Finished(const StageCounters& before) const {
    if (!counts_asks) return done_files + failed_files >= requested_files;
    const uint64_t asked = asked_files - std::min(asked_files, before.asked_files);
    const uint64_t settled = asked_resident_files + asked_failed_files -
                             std::min(asked_resident_files + asked_failed_files,
                                      before.asked_resident_files + before.asked_failed_files);
    return settled >= asked;
  }
};

uint64_t Since(uint64_t now, uint64_t then) { return now - std::min(now, then); }

// Why the files asked for since `before` are not resident, one line per
// reason: "  138 fit in no tier (...)".
std::string FailedLines(const StageCounters& before, const StageCounters& now) {
  std::string lines;
  for (size_t f = 0; f < StagePlanner::kFailures; ++f) {
    if (uint64_t n = Since(now.failed_by[f], before.failed_by[f]); n > 0) {
      lines += fmt::format("  {} {}\n", Grouped(n),
                           StagePlanner::FailureText(static_cast<StagePlanner::Failure>(f)));
    }
  }
  return lines;
}

// One progress line: our request's share of the counters (now - before).
std::string ProgressLine(const StageCounters& before, const StageCounters& now, double seconds) {
  uint64_t files = now.requested_files - std::min(now.requested_files, before.requested_files);
  uint64_t bytes = now.requested_bytes - std::min(now.requested_bytes, before.requested_bytes);
  uint64_t done = std::min(files, now.done_files - std::min(now.done_files, before.done_files));
  uint64_t done_bytes =
      std::min(bytes, now.done_bytes - std::min(now.done_bytes, before.done_bytes));
  uint64_t failed = now.failed_files - std::min(now.failed_files, before.failed_files);
  constexpr int kWidth = 28;
  double fraction = bytes   ? static_cast<double>(done_bytes) / static_cast<double>(bytes)
                    : files ? static_cast<double>(done + failed) / static_cast<double>(files)
                            : 1.0;
  int filled = std::clamp(static_cast<int>(fraction * kWidth), 0, kWidth);
  double rate = seconds > 0 ? static_cast<double>(done_bytes) / seconds : 0;
  std::string eta = "-";
  if (rate > 0 && done_bytes < bytes) {
    eta = fmt::format("{:.0f}s", static_cast<double>(bytes - done_bytes) / rate);
  }
  return fmt::format("[{}{}] {:5.1f}%  {}/{}  {}/{}  {}/s  ETA {}{}",
                     std::string(static_cast<size_t>(filled), '#'),
                     std::string(static_cast<size_t>(kWidth - filled), '-'), fraction * 100,
                     Grouped(done + failed), Counted(files, "file"), HumanBytes(done_bytes),
                     HumanBytes(bytes), HumanBytes(static_cast<uint64_t>(rate)), eta,
                     failed ? fmt::format("  ({} failed)", Grouped(failed)) : "");
}

// What this request did, counting the files that were resident already:
// "staged 100 files, 1.2 MiB in 0.3 s; 100 of the 200 files asked for were
// resident already".
std::string StagedLine(const StageCounters& before, const StageCounters& now, uint64_t failed,
                       double seconds) {
  auto since = [](uint64_t now, uint64_t then) { return now - std::min(now, then); };
  const uint64_t named = since(now.named_files, before.named_files);
  const uint64_t resident =
      std::min(named, since(now.resident_when_named_files, before.resident_when_named_files));
  const uint64_t to_stage = named - resident;
  if (to_stage == 0) {
    return fmt::format("nothing to stage: the {} asked for {} resident already",
                       Counted(named, "file"), named == 1 ? "was" : "were");
  }
  const uint64_t staged = to_stage - std::min(to_stage, failed);
  // What failed leads when nothing was staged (not "staged 0 files, 0 B").
  std::string line =
      staged == 0 && failed > 0
          ? fmt::format("staged nothing: {} failed in {:.1f} s", Counted(failed, "file"), seconds)
          : fmt::format("staged {}, {} in {:.1f} s", Counted(staged, "file"),
                        HumanBytes(since(now.made_resident_bytes, before.made_resident_bytes)),
                        seconds);
  if (failed > 0 && staged > 0) line += fmt::format("; {} failed", Grouped(failed));
  if (resident > 0) {
    line += fmt::format("; {} of the {} asked for {} resident already", Grouped(resident),
                        Counted(named, "file"), resident == 1 ? "was" : "were");
  }
  return line;
}

}  // namespace

int RunStage(const MountControl& mount, const std::vector<std::string>& paths, bool quiet) {
  if (!mount.HasControl("stage")) {
    throw ControlError(
        fmt::format("{} has no .tierfs/stage: this tierfs daemon predates staging", mount.mount()));
  }
  const JsonValue stats = mount.ReadStats();
  const JsonValue* tiers = stats.Find("tiers");
  if (tiers == nullptr || !tiers->is_array() || tiers->items().empty()) {
    throw ControlError(fmt::format(
        "{} has no tier (mounted without ram= or tier=): there is nowhere to stage into",
        mount.mount()));
  }
  std::string text;
  for (const std::string& p : paths) {
    if (p.empty() || p.find('\n') != std::string::npos) {
      throw ControlError(fmt::format("invalid path '{}' (empty or with a newline)", p));
    }
    // Every path must name something: a misspelt one among good ones is
    // not passed over.
    const std::string full = p[0] == '/' ? p : mount.mount() + "/" + p;
    struct stat st;
    if (::lstat(full.c_str(), &st) != 0) {
      throw ControlError(
          fmt::format("'{}' does not exist in {} (paths are relative to the mount's "
                      "root): nothing staged",
                      p, mount.mount()));
    }
    text += p + "\n";
  }
  StageCounters before = StageCounters::From(stats);
  auto start = std::chrono::steady_clock::now();
  const int err = mount.WriteControl("stage", text);
  if (err != 0 && err != EINVAL) {
    throw ControlError(mount.WriteFailure("stage", err));
  }
  const JsonValue written = mount.ReadStats();
  const JsonValue* group = written.Find("prefetch.stage");
  // The daemon's count of rejected lines, this write's share (as tierfs hint).
  uint64_t rejected = 0;
  if (group && group->Member("rejected_lines")) {
    rejected = std::min<uint64_t>(
        paths.size(), group->Uint("rejected_lines") - stats.Uint("prefetch.stage.rejected_lines"));
  }
  if (rejected > 0 || err == EINVAL) {
    std::fprintf(stderr, "tierfs stage: %s\n",
                 group
                     ? RejectedLines(*group, std::max<uint64_t>(rejected, 1), paths.size()).c_str()
                     : "the daemon rejected every path (EINVAL)");
  }
  if (err == EINVAL) {
    throw ControlError(
        "nothing staged: no path names a file or directory in the mount, relative to its root");
  }
  if (!group) {
    if (!quiet) std::printf("staging requested (this daemon does not report its progress)\n");
    return 0;
  }

  struct sigaction sa = {}, old_int = {}, old_term = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  const bool tty = ::isatty(STDERR_FILENO);
  auto last_line = start;
  StageCounters now;
  int status = 0;
  for (;;) {
    now = StageCounters::From(mount.ReadStats());
    auto t = std::chrono::steady_clock::now();
    double seconds = std::chrono::duration<double>(t - start).count();
    if (!quiet && tty) {
      std::fprintf(stderr, "\r%s\033[K", ProgressLine(before, now, seconds).c_str());
    } else if (!quiet && t - last_line >= std::chrono::seconds(5)) {
      std::fprintf(stderr, "%s\n", ProgressLine(before, now, seconds).c_str());
      last_line = t;
    }
    if (now.Finished(before)) break;
    if (g_interrupted.load()) {
      status = 130;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (!quiet && tty) std::fputc('\n', stderr);
  if (status == 130) {
    std::fprintf(stderr,
                 "tierfs stage: interrupted; the daemon keeps staging (see: tierfs stat %s)\n",
                 mount.mount().c_str());
    return status;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t failed = now.counts_asks ? Since(now.asked_failed_files, before.asked_failed_files)
                                    : Since(now.failed_files, before.failed_files);
  if (!quiet && now.counts_named) {
    std::printf("%s\n", StagedLine(before, now, failed, seconds).c_str());
  } else if (!quiet && now.requested_files == before.requested_files) {
    std::printf("nothing new to stage: these paths were requested before (%s staged so far)\n",
                Counted(now.done_files, "file").c_str());
  } else if (!quiet) {
    std::printf(
        "staged %s, %s in %.1f s%s\n",
        Counted(now.done_files - std::min(now.done_files, before.done_files), "file").c_str(),
        HumanBytes(now.done_bytes - std::min(now.done_bytes, before.done_bytes)).c_str(), seconds,
        failed ? fmt::format("; {} failed", Grouped(failed)).c_str() : "");
  }
  if (failed && now.counts_asks) {
    const uint64_t asked = Since(now.asked_files, before.asked_files);
    std::fprintf(stderr,
                 "tierfs stage: %s of the %s asked for %s not resident:\n%s"
                 "(the daemon's log names the first files of each reason)\n",
                 Grouped(failed).c_str(), Counted(asked, "file").c_str(),
                 failed == 1 ? "is" : "are", FailedLines(before, now).c_str());
    return 1;
  }
  if (failed) {
    std::fprintf(stderr, "tierfs stage: %s could not be staged (see the daemon's log)\n",
                 Counted(failed, "file").c_str());
    return 1;
  }
  return rejected > 0 ? 1 : 0;  // a path asked for was not staged
}

}  // namespace tierfs::cli
