#include "bench_options.h"

#include <charconv>
#include <optional>
#include <string_view>

#include "tiering/base/units.h"

namespace bench {
namespace {

template <typename T>
bool ParseUnsigned(std::string_view text, T& out, T min_value, T max_value) {
  T value{};
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return false;
  if (value < min_value || value > max_value) return false;
  out = value;
  return true;
}

bool ParseMs(std::string_view text, double& out) {
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0 || value > 1e6) {
    return false;
  }
  out = value;
  return true;
}

// A read block size: "1M", "64K", "4096" (ParseByteSize), 4 KiB to 64 MiB.
bool ParseBlock(std::string_view text, size_t& out) {
  const std::optional<uint64_t> bytes = tierfs::ParseByteSize(text);
  if (!bytes || *bytes < 4096 || *bytes > (64u << 20)) return false;
  out = static_cast<size_t>(*bytes);
  return true;
}

}  // namespace

std::string Usage() {
  return "usage: tierfs-bench ROOT [--epochs N] [--workers N] [--batch N] [--compute-ms MS]\n"
         "                    [--prefetch N] [--seed S] [--block SIZE] [--pfs-stats FILE]\n"
         "                    [--label NAME] [--json FILE|-] [--allow-errors] [--drop-caches]\n"
         "                    [--hint-order] [--read-log FILE]\n"
         "Reads every file below ROOT once per epoch in a seeded shuffled order.\n"
         "--drop-caches empties the kernel page cache before each epoch (needs root):\n"
         "a node whose memory cannot hold the dataset.\n"
         "--hint-order appends each epoch's order (paths relative to ROOT, one per line)\n"
         "to ROOT/.tierfs/order before the epoch, in one write, as tierfs_hint.py does for\n"
         "tierfs -o prefetch=order; without that file it warns and goes on.\n"
         "--read-log FILE appends each file's path relative to ROOT as its read starts.\n";
}

std::string ParseOptions(int argc, char* argv[], BenchOptions& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      return "";
    }
    if (arg == "--allow-errors" || arg == "--drop-caches" || arg == "--hint-order") {
      (arg == "--allow-errors"  ? o.allow_errors
       : arg == "--drop-caches" ? o.drop_caches
                                : o.hint_order) = true;
      continue;
    }
    if (arg.substr(0, 2) != "--") {
      if (!o.root.empty()) return "more than one ROOT: " + std::string(arg);
      o.root = arg;
      continue;
    }
    if (i + 1 >= argc) return std::string(arg) + " needs a value";
    const std::string_view value = argv[++i];
    bool ok = true;
    if (arg == "--epochs") {
      ok = ParseUnsigned(value, o.epochs, 1u, 100000u);
    } else if (arg == "--workers") {
      ok = ParseUnsigned(value, o.epoch.workers, 1u, 1024u);
    } else if (arg == "--batch") {
      ok = ParseUnsigned(value, o.epoch.batch, 1u, 1000000u);
    } else if (arg == "--prefetch") {
      ok = ParseUnsigned(value, o.epoch.prefetch_batches, 1u, 100000u);
    } else if (arg == "--compute-ms") {
      ok = ParseMs(value, o.epoch.compute_ms);
    } else if (arg == "--seed") {
      ok = ParseUnsigned<uint64_t>(value, o.seed, 0, UINT64_MAX);
    } else if (arg == "--block") {
      ok = ParseBlock(value, o.block);
    } else if (arg == "--pfs-stats") {
      o.pfs_stats = value;
    } else if (arg == "--label") {
      o.label = value;
      ok = o.label.find_first_of("\"\\") == std::string::npos;
    } else if (arg == "--json") {
      o.json_path = value;
    } else if (arg == "--read-log") {
      o.read_log = value;
    } else {
      return "unknown option " + std::string(arg);
    }
    if (!ok) return "bad value '" + std::string(value) + "' for " + std::string(arg);
  }
  if (o.root.empty()) return "no ROOT given";
  return "";
}

}  // namespace bench
