// tierfs stat --watch: rates of a running mount, redrawn every interval
// (as iostat or juicefs stats do) until Ctrl-C or the count is reached;
// one plain line per interval when standard output is not a terminal.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "tools/tierfs/commands.h"

namespace tierfs::cli {
namespace {

constexpr size_t kWidth = 100;  // columns of a line written to a pipe

std::atomic<bool> g_stop{false};
void OnStop(int) { g_stop.store(true); }

// The counters a rate is made of, at one moment.
struct Sample {
  std::chrono::steady_clock::time_point at;
  uint64_t reads = 0, read_bytes = 0, source_bytes = 0;
  uint64_t hits = 0, pieces = 0;  // reads.from_tiers, and ReadPieces: the hit ratio's terms
  uint64_t promoted = 0, promoted_bytes = 0;
  // Bytes served by each tier, named as `tierfs stat` names it, fastest first.
  std::vector<std::pair<std::string, uint64_t>> tier_bytes;
  std::map<std::string, uint64_t> leads;  // stream -> look-ahead lead (a gauge)
  uint64_t queued = 0;
  bool passthrough = false;  // files wholly in a tier are read by the kernel itself
  uint64_t passed_opens = 0, passed_bytes = 0;

  static Sample Of(const JsonValue& s) {
    Sample x;
    x.at = std::chrono::steady_clock::now();
    x.reads = s.Uint("requests.read");
    x.read_bytes = s.Uint("requests.read_bytes");
    x.source_bytes = s.Uint("source.read_bytes");
    x.hits = s.Uint("reads.from_tiers");
    x.pieces = ReadPieces(s);
    x.promoted = s.Uint("promotions.done");
    x.promoted_bytes = s.Uint("promotions.bytes");
    x.queued = s.Uint("promotions.queued_foreground") + s.Uint("promotions.queued_lookahead") +
               s.Uint("promotions.queued_background");
    if (const JsonValue* active = s.Find("passthrough.active"); active && active->boolean()) {
      x.passthrough = true;
      x.passed_opens = s.Uint("passthrough.opens");
      x.passed_bytes = s.Uint("passthrough.opened_bytes");
    }
    if (const JsonValue* tiers = s.Member("tiers"); tiers && tiers->is_array()) {
      for (const JsonValue& t : tiers->items())
        x.tier_bytes.emplace_back(TierLabel(t), t.Uint("bytes_served"));
    }
    if (const JsonValue* st = s.Find("prefetch.order.streams"); st && st->is_array()) {
      for (const JsonValue& t : st->items()) x.leads[t.String("name")] = t.Uint("lead");
    }
    return x;
  }
};

// How --watch names an order stream: its //stream name, "pid N" for the
// stream of a process that still runs, "" for one whose writer has ended.
std::string StreamLabel(const std::string& name) {
  if (name.rfind("pid:", 0) != 0) return name;
  char* end = nullptr;
  const long pid = std::strtol(name.c_str() + 4, &end, 10);
  if (*end != '\0' || pid <= 0) return name;
  if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) return fmt::format("pid {}", pid);
  return "";
}

std::string Rate(uint64_t now, uint64_t before, double seconds, bool bytes) {
  double r = now >= before ? static_cast<double>(now - before) / seconds : 0;
  return bytes ? HumanBytes(static_cast<uint64_t>(r)) + "/s" : fmt::format("{:.0f}/s", r);
}

// The lines for one interval.
std::vector<std::string> Render(const Sample& a, const Sample& b) {
  const double dt = std::max(1e-3, std::chrono::duration<double>(b.at - a.at).count());
  std::vector<std::string> out;
  const uint64_t hits = b.hits - a.hits, pieces = b.pieces - a.pieces;
  out.push_back(fmt::format("reads {} ({}), hit ratio {}, SOURCE {}",
                            Rate(b.reads, a.reads, dt, false),
                            Rate(b.read_bytes, a.read_bytes, dt, true), Percent(hits, pieces),
                            Rate(b.source_bytes, a.source_bytes, dt, true)));
  std::string tiers;
  for (const auto& [name, bytes] : b.tier_bytes) {
    uint64_t before = 0;  // the same tier in the sample before (the list does not change)
    for (const auto& [n, v] : a.tier_bytes) before = n == name ? v : before;
    tiers += fmt::format("{}{} {}", tiers.empty() ? "" : ", ", name, Rate(bytes, before, dt, true));
  }
  if (!tiers.empty()) out.push_back("tiers " + tiers);
  // Their reads never reach the daemon: the line above cannot count them.
  if (b.passthrough) {
    out.push_back(
        fmt::format("passthrough opens {} ({} of files): read by the kernel from the "
                    "tiers, not counted above",
                    Rate(b.passed_opens, a.passed_opens, dt, false),
                    Rate(b.passed_bytes, a.passed_bytes, dt, true)));
  }
  out.push_back(fmt::format("promotions {} ({}), {} queued",
                            Rate(b.promoted, a.promoted, dt, false),
                            Rate(b.promoted_bytes, a.promoted_bytes, dt, true), Grouped(b.queued)));
  if (!b.leads.empty()) {
    // A stream of no //stream name is keyed by its writer's pid: said only
    // while that process runs (a `tierfs hint` has ended at once); the
    // orders of ended writers are said together.
    std::string leads, ended;
    for (const auto& [name, lead] : b.leads) {
      const std::string label = StreamLabel(name);
      std::string& into = label.empty() ? ended : leads;
      into += fmt::format("{}{}{}", into.empty() ? "" : ", ", label.empty() ? "" : label + " ",
                          Grouped(lead));
    }
    if (!ended.empty()) {
      leads += fmt::format("{}orders of ended writers {}", leads.empty() ? "" : ", ", ended);
    }
    out.push_back("look-ahead lead (files resident ahead of the readers): " + leads);
  }
  return out;
}

}  // namespace

int RunWatch(const MountControl& mount, double seconds, uint64_t count) {
  struct sigaction sa = {}, old_int = {}, old_term = {};
  sa.sa_handler = OnStop;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  Sample last = Sample::Of(mount.ReadStats());
  int status = 0;
  for (uint64_t n = 0; count == 0 || n < count; ++n) {
    // Sleep in small steps, so Ctrl-C ends the watch at once.
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!g_stop.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (g_stop.load()) break;
    Sample now;
    try {
      now = Sample::Of(mount.ReadStats());
    } catch (const ControlError& e) {
      std::fprintf(stderr, "tierfs stat: %s\n", e.what());
      status = 1;
      break;
    }
    std::vector<std::string> lines = Render(last, now);
    if (tty) {
      std::printf("\033[H\033[2Jtierfs at %s, every %gs (Ctrl-C to stop)\n\n",
                  mount.mount().c_str(), seconds);
      for (const auto& l : lines) std::printf("%s\n", l.c_str());
    } else {
      // Not a terminal: each interval's lines as they come, within 100
      // columns, the lines after an interval's first ("reads ...") indented.
      bool first = true;
      for (const std::string& line : lines) {
        for (const std::string& part : WrapWords(line, kWidth - 2)) {
          std::printf("%s%s\n", first ? "" : "  ", part.c_str());
          first = false;
        }
      }
    }
    std::fflush(stdout);
    last = now;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return status;
}

}  // namespace tierfs::cli
