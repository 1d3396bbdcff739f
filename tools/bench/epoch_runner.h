// One epoch of a data loader: N worker threads read batches of files in a
// given order while a trainer consumes the batches in order, spending a fixed
// compute time per batch, as a DataLoader feeding a training step does.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bench {

// Reads one whole file; returns the bytes read or -errno. Called from worker
// threads concurrently, never twice for the same index within an epoch.
using FileReader = std::function<int64_t(const std::string& path)>;

struct EpochConfig {
  unsigned workers = 4;
  unsigned batch = 32;            // files per batch
  double compute_ms = 0;          // trainer time per batch
  unsigned prefetch_batches = 0;  // batches read ahead of the trainer; 0 = 2 * workers
};

struct EpochResult {
  double wall_s = 0;
  uint64_t files_ok = 0;
  uint64_t errors = 0;
  uint64_t bytes = 0;
  std::vector<int64_t> latencies_ns;     // one per file read (failed ones too)
  std::vector<uint32_t> reads_per_file;  // by file index: how often it was read
};

// Reads every files[order[i]] once. REQUIRES: order is a permutation of
// indices into files; config.workers >= 1 and config.batch >= 1.
EpochResult RunEpoch(const std::vector<std::string>& files, const std::vector<size_t>& order,
                     const EpochConfig& config, const FileReader& read);

// The q-quantile (0..1) of the values in nanoseconds, as milliseconds; 0 if empty.
double QuantileMs(std::vector<int64_t> values_ns, double q);

}  // namespace bench
