// tierfs-bench: the epoch loader of the benchmark suite.
//
//   tierfs-bench ROOT [--epochs 3] [--workers 4] [--batch 32] [--compute-ms 0]
//                [--seed 1] [--block 1M] [--pfs-stats FILE] [--label NAME]
//                [--json FILE] [--allow-errors] [--drop-caches] [--hint-order]
//                [--read-log FILE]
//
// Lists ROOT once, then each epoch shuffles the file list with (seed, epoch),
// reads every file with N worker threads and reports per epoch: wall time,
// files/s, MB/s (10^6 B/s), read latency p50/p99 (open..close per file), and
// the PFS operations and bytes of the epoch, from the counters file FILE
// (pfs-sim's <mnt>/.pfs-sim/stats). A human table goes to stdout; with
// --json, one JSON object per line is appended to FILE ("-" = stdout).
// --hint-order declares each epoch's order to ROOT/.tierfs/order before the
// epoch (tierfs -o prefetch=order); the epoch's row then carries "hinted",
// the lines written (-1: not possible, warned once on stderr).
// Exit: 0 ok; 1 read errors (unless --allow-errors) or a file not read
// exactly once; 2 bad arguments or an unreadable ROOT.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "bench_options.h"
#include "epoch_order.h"
#include "epoch_runner.h"
#include "file_io.h"
#include "order_hint.h"

namespace {

using bench::BenchOptions;
using Counters = std::map<std::string, uint64_t>;

uint64_t Get(const Counters& c, const char* key) {
  const auto it = c.find(key);
  return it == c.end() ? 0 : it->second;
}

std::string PfsJson(const Counters& delta) {
  if (delta.empty()) return "";
  return fmt::format(
      ", \"pfs_meta_ops\": {}, \"pfs_opens\": {}, \"pfs_reads\": {}, \"pfs_read_bytes\": {}, "
      "\"pfs_read_errors\": {}",
      Get(delta, "meta_ops"), Get(delta, "opens"), Get(delta, "reads"), Get(delta, "read_bytes"),
      Get(delta, "read_errors"));
}

class Report {
 public:
  explicit Report(const BenchOptions& options) : options_(options) {
    if (options.json_path == "-") {
      json_ = stdout;
    } else if (!options.json_path.empty()) {
      json_ = std::fopen(options.json_path.c_str(), "a");
      if (json_ == nullptr) throw std::runtime_error("cannot append to " + options.json_path);
    }
  }
  ~Report() {
    if (json_ != nullptr && json_ != stdout) std::fclose(json_);
  }

  void Listing(size_t files, double seconds, const Counters& pfs) {
    fmt::print("{}: {} files listed in {:.3f} s{}\n", options_.label, files, seconds,
               pfs.empty() ? "" : fmt::format(", PFS meta ops {}", Get(pfs, "meta_ops")));
    fmt::print("{:<16} {:>5} {:>8} {:>9} {:>8} {:>8} {:>8} {:>6} {:>9} {:>9} {:>9}\n", "label",
               "epoch", "wall_s", "files/s", "MB/s", "p50_ms", "p99_ms", "errors", "pfs_meta",
               "pfs_reads", "pfs_MB");
    Json(fmt::format("\"phase\": \"list\", \"files\": {}, \"wall_s\": {:.4f}{}", files, seconds,
                     PfsJson(pfs)));
  }

  void Epoch(unsigned epoch, const bench::EpochResult& r, const Counters& pfs,
             std::optional<int64_t> hinted) {
    const double files_per_s = static_cast<double>(r.files_ok) / r.wall_s;
    const double mb_per_s = static_cast<double>(r.bytes) / 1e6 / r.wall_s;
    const double p50 = bench::QuantileMs(r.latencies_ns, 0.50);
    const double p99 = bench::QuantileMs(r.latencies_ns, 0.99);
    const std::string na = "-";
    fmt::print(
        "{:<16} {:>5} {:>8.3f} {:>9.1f} {:>8.1f} {:>8.2f} {:>8.2f} {:>6} {:>9} {:>9} {:>9}\n",
        options_.label, epoch, r.wall_s, files_per_s, mb_per_s, p50, p99, r.errors,
        pfs.empty() ? na : std::to_string(Get(pfs, "meta_ops")),
        pfs.empty() ? na : std::to_string(Get(pfs, "reads")),
        pfs.empty() ? na : fmt::format("{:.1f}", Get(pfs, "read_bytes") / 1e6));
    std::fflush(stdout);
    Json(fmt::format(
        "\"phase\": \"epoch\", \"epoch\": {}, \"wall_s\": {:.4f}, \"files\": {}, \"errors\": {}, "
        "\"bytes\": {}, \"files_per_s\": {:.2f}, \"mb_per_s\": {:.3f}, \"lat_p50_ms\": {:.3f}, "
        "\"lat_p99_ms\": {:.3f}{}{}",
        epoch, r.wall_s, r.files_ok, r.errors, r.bytes, files_per_s, mb_per_s, p50, p99,
        PfsJson(pfs), hinted ? fmt::format(", \"hinted\": {}", *hinted) : ""));
  }

 private:
  void Json(const std::string& fields) {
    if (json_ == nullptr) return;
    fmt::print(json_,
               "{{\"label\": \"{}\", \"workers\": {}, \"batch\": {}, \"compute_ms\": {}, "
               "\"seed\": {}, {}}}\n",
               options_.label, options_.epoch.workers, options_.epoch.batch,
               options_.epoch.compute_ms, options_.seed, fields);
    std::fflush(json_);
  }

  const BenchOptions& options_;
  std::FILE* json_ = nullptr;
};

// Writes back dirty pages and drops the page cache, dentries and inodes.
bool DropCaches() {
  sync();
  std::FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("3\n", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Run(const BenchOptions& options) {
  Report report(options);
  const bool pfs = !options.pfs_stats.empty();
  auto counters = [&] { return pfs ? bench::ReadCounters(options.pfs_stats) : Counters{}; };
  if (pfs && counters().empty()) {
    fmt::print(stderr, "tierfs-bench: no counters in {}\n", options.pfs_stats);
    return 2;
  }
  Counters before = counters();
  const auto list_start = std::chrono::steady_clock::now();
  const std::vector<std::string> files = bench::ListFiles(options.root);
  report.Listing(files.size(), Seconds(list_start), bench::CounterDelta(before, counters()));
  if (files.empty()) {
    fmt::print(stderr, "tierfs-bench: no files below {}\n", options.root);
    return 2;
  }
  const size_t block = options.block;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> log_file(nullptr, &std::fclose);
  if (!options.read_log.empty()) {
    log_file.reset(std::fopen(options.read_log.c_str(), "a"));
    if (!log_file) throw std::runtime_error("cannot append to " + options.read_log);
  }
  std::FILE* const read_log = log_file.get();
  std::mutex read_log_mu;  // guards read_log
  const size_t root_prefix = options.root.size() + (options.root.back() == '/' ? 0 : 1);
  const bench::FileReader reader = [&, block](const std::string& path) {
    if (read_log != nullptr) {
      std::lock_guard lock(read_log_mu);
      fmt::print(read_log, "{}\n", std::string_view(path).substr(root_prefix));
    }
    return bench::ReadWholeFile(path, block);
  };
  bench::OrderHint hint(options.root);
  int status = 0;
  for (unsigned epoch = 1; epoch <= options.epochs; ++epoch) {
    const std::vector<size_t> order = bench::EpochOrder(files.size(), options.seed, epoch);
    if (options.drop_caches && !DropCaches()) {
      fmt::print(stderr, "tierfs-bench: cannot drop caches (need root)\n");
      return 2;
    }
    std::optional<int64_t> hinted;
    if (options.hint_order) hinted = hint.Declare(files, order);
    before = counters();
    const bench::EpochResult result = bench::RunEpoch(files, order, options.epoch, reader);
    if (read_log != nullptr) std::fflush(read_log);
    report.Epoch(epoch, result, bench::CounterDelta(before, counters()), hinted);
    for (uint32_t reads : result.reads_per_file) {
      if (reads != 1) {
        fmt::print(stderr, "tierfs-bench: epoch {} read a file {} times\n", epoch, reads);
        return 1;
      }
    }
    if (result.errors > 0 && !options.allow_errors) status = 1;
  }
  if (status != 0) fmt::print(stderr, "tierfs-bench: read errors (see table)\n");
  return status;
}

}  // namespace

int main(int argc, char* argv[]) {
  BenchOptions options;
  const std::string error = bench::ParseOptions(argc, argv, options);
  if (options.help) {
    fmt::print("{}", bench::Usage());
    return 0;
  }
  if (!error.empty()) {
    fmt::print(stderr, "tierfs-bench: {}\n{}", error, bench::Usage());
    return 2;
  }
  try {
    return Run(options);
  } catch (const std::exception& e) {
    fmt::print(stderr, "tierfs-bench: {}\n", e.what());
    return 2;
  }
}
