// Command-line options of tierfs-bench.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "epoch_runner.h"

namespace bench {

struct BenchOptions {
  std::string root;
  unsigned epochs = 3;
  uint64_t seed = 1;
  size_t block = 1 << 20;  // bytes per read() call
  EpochConfig epoch;
  std::string pfs_stats;  // counters file, e.g. <pfs-sim mnt>/.pfs-sim/stats
  std::string label = "run";
  std::string json_path;  // append JSON lines here; "-" = stdout
  bool allow_errors = false;
  bool drop_caches = false;  // drop the kernel page cache before each epoch (root)
  bool hint_order = false;   // declare each epoch's order to ROOT/.tierfs/order
  std::string read_log;      // append each file's path (relative) as its read starts
  bool help = false;
};

// Parses argv into `options`; returns an empty string or an error message.
std::string ParseOptions(int argc, char* argv[], BenchOptions& options);

std::string Usage();

}  // namespace bench
