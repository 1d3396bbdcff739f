#include "tools/tierfs/subcommands.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tools/tierfs/commands.h"

namespace tierfs::cli {
namespace {

struct Spec {
  const char* name;
  const char* synopsis;
  const char* summary;
};

constexpr Spec kSubcommands[] = {
    {"stat", "MOUNT [--json | --watch [SECONDS] [--count N]]",
     "summary of the mount's counters: tiers, hit rates, SOURCE traffic,\n"
     "    promotions, prefetching (--json: the raw .tierfs/stats; --watch: rates\n"
     "    redrawn every SECONDS (1) until Ctrl-C, or N times)"},
    {"hint", "MOUNT FILE|-",
     "declare the coming read order: append the paths in FILE (one per line,\n"
     "    relative to MOUNT, or to the current directory when they name something\n"
     "    in MOUNT from there, as `find MOUNT` prints them; '-' = standard input)\n"
     "    to .tierfs/order and report\n"
     "    how many the daemon accepted, and the first rejected line and why;\n"
     "    fails if none was valid"},
    {"stage", "MOUNT [PATH...] [--quiet]",
     "promote PATHs (files or directories, relative to MOUNT; default '.' =\n"
     "    everything) into the tiers now, with a progress bar until done"},
};

const Spec* FindSpec(const std::string& name) {
  for (const Spec& s : kSubcommands) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

// A bad command line for subcommand `spec`: message plus its synopsis, status 2.
int Usage(const Spec& spec, const std::string& message) {
  std::fprintf(stderr, "tierfs %s: %s\nusage: tierfs %s %s\n", spec.name, message.c_str(),
               spec.name, spec.synopsis);
  return 2;
}

}  // namespace

bool IsSubcommand(const std::string& word) { return FindSpec(word) != nullptr; }

std::string SubcommandUsage(const std::string& program) {
  std::string s = "\nSubcommands, for a running mount (MOUNT is its mount point):\n";
  for (const Spec& spec : kSubcommands) {
    s += fmt::format("  {} {} {}\n    {}\n", program, spec.name, spec.synopsis, spec.summary);
  }
  s += fmt::format("  {} help [SUBCOMMAND]\n    this help, or a subcommand's\n", program);
  s += "A SOURCE directory named like a subcommand (or help) is mounted with ./NAME.\n";
  return s;
}

int RunSubcommand(const std::vector<std::string>& args) {
  const Spec& spec = *FindSpec(args.at(1));
  const std::string name = spec.name;
  std::vector<std::string> positional;
  bool json = false, quiet = false, options_done = false, watch = false;
  double every = 1;
  uint64_t count = 0;
  for (size_t i = 2; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a.empty() || a[0] != '-' || a == "-") {
      positional.push_back(a);
    } else if (a == "--") {
      options_done = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: tierfs %s %s\n  %s\n", spec.name, spec.synopsis, spec.summary);
      return 0;
    } else if (a == "--json" && name == "stat") {
      json = true;
    } else if (a == "--watch" && name == "stat") {
      watch = true;
      if (i + 1 < args.size() && !args[i + 1].empty() &&
          std::isdigit(static_cast<unsigned char>(args[i + 1][0]))) {
        char* end = nullptr;
        every = std::strtod(args[++i].c_str(), &end);
        if (*end != '\0' || !(every >= 0.1 && every <= 3600)) {
          return Usage(spec, fmt::format("--watch SECONDS must be 0.1 to 3600, not '{}'", args[i]));
        }
      }
    } else if (a == "--count" && name == "stat" && i + 1 < args.size()) {
      char* end = nullptr;
      const std::string& v = args[++i];
      count = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || count == 0 || v[0] == '-') {
        return Usage(spec, fmt::format("--count N must be a positive number, not '{}'", v));
      }
    } else if ((a == "--quiet" || a == "-q") && name == "stage") {
      quiet = true;
    } else {
      return Usage(spec, fmt::format("unknown option '{}'", a));
    }
  }
  if (positional.empty()) return Usage(spec, "expected MOUNT");
  if (name == "stat" && positional.size() != 1) {
    return Usage(spec, fmt::format("expected only MOUNT, got '{}' too", positional[1]));
  }
  if (watch && json) return Usage(spec, "--watch and --json do not mix");
  if (count > 0 && !watch) return Usage(spec, "--count needs --watch");
  if (name == "hint" && positional.size() != 2) {
    return Usage(spec, positional.size() < 2 ? "expected a FILE of paths ('-' = standard input)"
                                             : "expected one FILE only");
  }
  try {
    MountControl mount(positional[0]);
    if (name == "stat" && watch) return RunWatch(mount, every, count);
    if (name == "stat") return RunStat(mount, json);
    if (name == "hint") return RunHint(mount, positional[1]);
    std::vector<std::string> paths(positional.begin() + 1, positional.end());
    if (paths.empty()) paths.push_back(".");
    return RunStage(mount, paths, quiet);
  } catch (const ControlError& e) {
    std::fprintf(stderr, "tierfs %s: %s\n", spec.name, e.what());
    return 1;
  }
}

int RunHint(const MountControl& mount, const std::string& list_path) {
  if (!mount.HasControl("order")) {
    throw ControlError(fmt::format(
        "{} has no .tierfs/order: this tierfs daemon predates order hints", mount.mount()));
  }
  const std::string input = ReadInput(list_path);
  // A relative path that names something in the mount from the current
  // directory (what `find MOUNT -type f` prints) is made absolute, as the
  // Python helper does; any other is taken relative to the mount's root.
  std::error_code cwd_error, root_error;
  const std::filesystem::path cwd = std::filesystem::current_path(cwd_error);
  std::string root = std::filesystem::weakly_canonical(mount.mount(), root_error).string();
  if (root.empty() || root.back() != '/') root += '/';
  const bool from_cwd = !cwd_error && !root_error;
  std::string text;
  uint64_t lines = 0, directives = 0;
  for (size_t start = 0; start < input.size();) {
    size_t end = input.find('\n', start);
    if (end == std::string::npos) end = input.size();
    std::string line = input.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    ++lines;
    if (line.rfind("//", 0) == 0) ++directives;
    if (line[0] != '/' && from_cwd) {
      std::string here = (cwd / line).lexically_normal().string();
      if (here.compare(0, root.size(), root) == 0) line = here;
    }
    text += line + "\n";
  }
  if (lines == 0) {
    throw ControlError(fmt::format("{} holds no paths",
                                   list_path == "-" ? "standard input" : "'" + list_path + "'"));
  }
  JsonValue before = mount.ReadStats();
  int err = mount.WriteControl("order", text);
  JsonValue after = mount.ReadStats();
  const JsonValue* order = after.Find("prefetch.order");
  if (err != 0 && err != EINVAL) {
    throw ControlError(mount.WriteFailure("order", err));
  }
  if (!order || !order->Member("valid_lines")) {
    if (err == EINVAL) throw ControlError("the daemon rejected every line (EINVAL)");
    std::printf("wrote %s (this daemon does not report how many it accepted)\n",
                Counted(lines, "path").c_str());
    return 0;
  }
  // The daemon's counts are everyone's: other writers' lines meanwhile are
  // not ours (they made "accepted 603 of 600").
  uint64_t valid = std::min<uint64_t>(
      lines, order->Uint("valid_lines") - before.Uint("prefetch.order.valid_lines"));
  uint64_t rejected = std::min<uint64_t>(
      lines - valid, order->Uint("rejected_lines") - before.Uint("prefetch.order.rejected_lines"));
  // Directives ("//epoch") are accepted lines but not paths.
  const uint64_t valid_directives = std::min<uint64_t>(
      {valid, directives,
       order->Uint("directive_lines") - before.Uint("prefetch.order.directive_lines")});
  const uint64_t valid_paths = valid - valid_directives;
  const std::string mode = after.String("prefetch.mode", "?");
  std::printf("accepted %s of %s%s, rejected %s; declared order now %s (mode %s)\n",
              Grouped(valid_paths).c_str(), Counted(lines - directives, "path").c_str(),
              directives == 0 ? ""
                              : fmt::format(" and {} of {}", Grouped(valid_directives),
                                            Counted(directives, "directive"))
                                    .c_str(),
              Grouped(rejected).c_str(), Counted(order->Uint("declared"), "file").c_str(),
              mode.c_str());
  if (rejected > 0 || err == EINVAL) {
    std::fprintf(stderr, "tierfs hint: %s\n",
                 RejectedLines(*order, std::max<uint64_t>(rejected, 1), lines).c_str());
  }
  if (err == EINVAL || valid == 0) {
    std::fprintf(stderr,
                 "tierfs hint: no valid path: each line must name a file in the mount, relative "
                 "to %s\n",
                 mount.mount().c_str());
    return 1;
  }
  if (mode != "order" && mode != "?") {
    std::fprintf(stderr, "tierfs hint: warning: %s\n", UnusedOrder(mount, mode).c_str());
  }
  // The accepted lines are kept; a script still learns that some were not.
  return rejected > 0 ? 1 : 0;
}

std::string UnusedOrder(const MountControl& mount, const std::string& mode) {
  return fmt::format(
      "{} is in prefetch mode {}: the declared order is kept but not followed; to follow it: "
      "echo order > {}",
      mount.mount(), mode, mount.ControlPath("prefetch"));
}

std::string RejectedLines(const JsonValue& group, uint64_t rejected, uint64_t lines) {
  std::string s = fmt::format("rejected {} of {}", Grouped(rejected), Counted(lines, "line"));
  const JsonValue* last = group.Member("last_rejected");
  if (last == nullptr || !last->is_object()) return s + " (see the daemon's log for why)";
  return s + fmt::format("; first: '{}': {}", last->String("line"), last->String("reason"));
}

std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 6) {
    v /= 1024;
    ++unit;
  }
  return fmt::format("{:.{}f} {}", v, v < 10 ? 2 : 1, kUnits[unit]);
}

std::string Percent(uint64_t part, uint64_t whole) {
  if (whole == 0) return "-";
  return fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

}  // namespace tierfs::cli
