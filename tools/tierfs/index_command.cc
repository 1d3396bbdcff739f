// tierfs index SOURCE FILE: scans SOURCE (or updates FILE) and saves the
// namespace index a mount loads with -o index=FILE. Unlike the other
// subcommands it needs no mount: it links the tiering library.
#include "tools/tierfs/index_command.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "fs/mount/scan_progress.h"
#include "tiering/base/log.h"
#include "tiering/base/units.h"
#include "tiering/namespace/namespace_open.h"

namespace tierfs::cli {
namespace {

constexpr const char* kSynopsis =
    "SOURCE FILE [--check full|dirs] [--threads auto|N] [--wait SECONDS] [--quiet]";

int Usage(const std::string& message) {
  std::fprintf(stderr, "tierfs index: %s\nusage: tierfs index %s\n", message.c_str(), kSynopsis);
  return 2;
}

bool ParseNumber(const std::string& text, unsigned lo, unsigned hi, unsigned* out) {
  unsigned v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

// What `tierfs index` does, under its synopsis line.
constexpr const char* kDescription =
    "    scan SOURCE and save its namespace index in FILE (with --check dirs:\n"
    "    update FILE, listing only the directories that changed); mount with\n"
    "    -o index=FILE (an absolute path there; here FILE may be relative to the\n"
    "    current directory). Prints the scan's figures.\n";

std::string IndexUsage(const std::string& program) {
  return fmt::format("  {} index {}\n{}", program, kSynopsis, kDescription);
}

int RunIndexCommand(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  OpenOptions options;
  options.check = IndexCheck::kFull;
  bool quiet = false;
  for (size_t i = 2; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string* { return i + 1 < args.size() ? &args[++i] : nullptr; };
    if (a == "-h" || a == "--help") {
      std::printf("usage: tierfs index %s\n%s", kSynopsis, kDescription);
      return 0;
    } else if (a == "--quiet" || a == "-q") {
      quiet = true;
    } else if (a == "--check") {
      const std::string* v = value();
      if (!v || !ParseIndexCheck(*v, &options.check) || options.check == IndexCheck::kNone) {
        return Usage("--check takes full or dirs");
      }
    } else if (a == "--threads") {
      const std::string* v = value();
      if (v && *v == "auto") {
        options.scan_threads = 0;
      } else if (!v || !ParseNumber(*v, 1, 1024, &options.scan_threads)) {
        return Usage("--threads takes auto or a number from 1 to 1024");
      }
    } else if (a == "--wait") {
      const std::string* v = value();
      if (!v || !ParseNumber(*v, 0, 86400, &options.wait_s)) {
        return Usage("--wait takes seconds from 0 to 86400");
      }
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      return Usage(fmt::format("unknown option '{}'", a));
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) return Usage("expected SOURCE and FILE");
  char resolved[PATH_MAX];
  if (::realpath(positional[0].c_str(), resolved) == nullptr) {
    std::fprintf(stderr, "tierfs index: SOURCE '%s': %s\n", positional[0].c_str(),
                 std::strerror(errno));
    return 1;
  }
  std::string source = resolved;
  options.index = positional[1];
  if (options.index.empty()) return Usage("FILE is empty");
  if (options.index[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) return Usage("cannot resolve FILE");
    options.index = std::string(cwd) + "/" + options.index;
  }
  struct stat st;
  if (::stat(source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "tierfs index: SOURCE '%s' is not a directory\n", source.c_str());
    return 1;
  }
  Result<std::unique_ptr<Backend>> posix = NewPosixBackend(source);
  if (!posix.ok()) {
    std::fprintf(stderr, "tierfs index: SOURCE '%s': %s\n", source.c_str(),
                 std::strerror(posix.status().code()));
    return 1;
  }
  std::unique_ptr<Backend> backend = std::move(posix).value();
  Log::SetLevel(quiet ? kWarning : kInfo);
  ScanReport scan;
  OpenReport report;
  auto open = [&] {
    ScanProgress progress(&scan, "scanning", !quiet);  // gone before the report is printed
    return OpenNamespace(backend.get(), {source, st.st_dev, st.st_ino}, options, &report, &scan);
  };
  Result<std::unique_ptr<Namespace>> opened = open();
  for (const auto& note : report.notes) std::fprintf(stderr, "tierfs index: %s\n", note.c_str());
  if (!opened.ok()) {
    std::fprintf(stderr, "tierfs index: %s\n", opened.status().message().c_str());
    return 1;
  }
  std::unique_ptr<Namespace> ns = std::move(opened).value();
  if (!quiet) {
    double s = report.seconds > 0 ? report.seconds : 1e-9;
    std::printf(
        "%s: %s\n  %s (%s bytes), %s, %s, %s skipped\n"
        "  %.2f s, %s metadata operations on SOURCE (%s stat, %s list, %s readlink):\n"
        "  %.0f operations/s, %.0f entries/s; directories listed %s, taken from the index %s;\n"
        "  scan_threads %s\n",
        source.c_str(), report.how.c_str(), Counted(ns->file_count(), "file").c_str(),
        Grouped(ns->total_file_bytes()).c_str(), Counted(ns->dir_count(), "directory").c_str(),
        Counted(ns->symlink_count(), "symlink").c_str(), Grouped(ns->skipped_count()).c_str(),
        report.seconds, Grouped(report.meta_ops).c_str(), Grouped(scan.stats.load()).c_str(),
        Grouped(scan.lists.load()).c_str(), Grouped(scan.readlinks.load()).c_str(),
        static_cast<double>(report.meta_ops) / s, static_cast<double>(ns->size()) / s,
        Grouped(scan.dirs_listed.load()).c_str(), Grouped(scan.dirs_reused.load()).c_str(),
        options.scan_threads == 0 ? "auto" : std::to_string(options.scan_threads).c_str());
    struct stat ist;
    if (::stat(options.index.c_str(), &ist) == 0) {
      std::printf("  index %s: %s bytes (%.1f per entry)%s\n", options.index.c_str(),
                  Grouped(static_cast<uint64_t>(ist.st_size)).c_str(),
                  static_cast<double>(ist.st_size) / static_cast<double>(ns->size()),
                  report.written ? "" : ", not rewritten");
    }
  }
  return report.written || (report.from_index && !report.scanned) ? 0 : 1;
}

}  // namespace tierfs::cli
