// Fuzz target: the mount's command line (fs/config/options.cc, ParseCommandLine),
// which a job may supply (fstab lines, a Slurm prolog's -o list).
//
// An input without a NUL byte is one -o list: tierfs SRC MNT -o <input>.
// An input with NUL bytes is the whole argv after the program name, one
// argument per NUL-separated piece (so -f, -d, --, positionals and -oLIST
// are reached too).
//
// Parsing is pure: ParseCommandLine neither checks nor creates paths
// (tier=PATH:SIZE, index=FILE and peers=FILE are only recorded; the daemon
// opens them later), so the target writes no file. It aborts on any breach of:
//   - a bad command line fails with a message (a Status), nothing else;
//   - an accepted one has values within the documented ranges;
//   - a FUSE option handed on has every ',' and '\' escaped, so joining the
//     list with commas (as the daemon does for libfuse) cannot split it.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fs/config/options.h"

namespace tierfs {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "options_fuzz: %s\n", what.c_str());
  std::abort();
}

std::vector<std::string> Args(const std::string& input) {
  if (input.find('\0') == std::string::npos) return {"tierfs", "src", "mnt", "-o", input};
  std::vector<std::string> args{"tierfs"};
  size_t begin = 0;
  for (size_t nul; (nul = input.find('\0', begin)) != std::string::npos; begin = nul + 1) {
    args.push_back(input.substr(begin, nul - begin));
  }
  args.push_back(input.substr(begin));
  return args;
}

// One escaped FUSE option: '\' always escapes the next byte, no bare ','.
void CheckEscaped(const std::string& opt) {
  if (opt.empty()) Fail("an empty FUSE option");
  for (size_t i = 0; i < opt.size(); ++i) {
    if (opt[i] == ',') Fail("an unescaped ',' in FUSE option " + opt);
    if (opt[i] == '\\' && ++i == opt.size()) Fail("a trailing '\\' in FUSE option " + opt);
  }
}

void CheckRanges(const MountConfig& c) {
  auto in = [](uint64_t v, uint64_t lo, uint64_t hi) { return v >= lo && v <= hi; };
  // scan_threads 0 is auto (tuned while scanning).
  if (!in(c.threads, 1, 1024) || !in(c.scan_threads, 0, 1024)) Fail("threads out of range");
  if (c.max_open_files != 0 && !in(c.max_open_files, 16, 1u << 30)) Fail("max_open_files");
  if (!std::isfinite(c.entry_timeout) || c.entry_timeout < 0 || !std::isfinite(c.attr_timeout) ||
      c.attr_timeout < 0) {
    Fail("a timeout that is not a number of seconds >= 0");
  }
  if (!in(c.tiering.chunk_size, 1u << 20, 4ull << 30)) Fail("chunk_size out of range");
  for (const auto& dir : c.tiering.dirs) {
    if (dir.path.empty() || dir.budget == 0) Fail("a tier without a path or a budget");
  }
  if (!c.index.empty() && c.index != "auto" && c.index[0] != '/') Fail("a relative index path");
  if (c.readdir != ReaddirMode::kPlus && c.readdir != ReaddirMode::kPlain &&
      c.readdir != ReaddirMode::kAuto) {
    Fail("readdir mode");
  }
}

}  // namespace
}  // namespace tierfs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierfs;
  std::vector<std::string> args = Args(std::string(reinterpret_cast<const char*>(data), size));
  Result<MountConfig> parsed = ParseCommandLine(args);
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) Fail("a refused command line without a message");
    return 0;
  }
  const MountConfig& config = *parsed;
  if (config.action != MountConfig::Action::kMount) return 0;
  CheckRanges(config);
  for (const std::string& opt : config.fuse_options) CheckEscaped(opt);
  return 0;
}
