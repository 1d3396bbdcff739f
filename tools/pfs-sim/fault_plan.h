// Deterministic fault injection for pfs-sim.
//
// Whether a read fails or stalls depends only on (seed, path, offset), never
// on timing or thread interleaving, so a benchmark with faults is repeatable:
// the same read of the same file fails in every run with the same seed.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>

#include "sim_params.h"

namespace pfssim {

class FaultPlan {
 public:
  explicit FaultPlan(const SimParams& params);

  // True if the read of `path` (relative to the root) at `offset` must fail
  // with EIO: the path is a named failing file, or the read hashes below
  // fail_rate.
  bool FailsRead(const std::string& path, uint64_t offset) const;

  // True if opening directory `path` (relative to the root, "" the root)
  // must fail with EIO: it is a named failing directory.
  bool FailsOpendir(const std::string& path) const;

  // True if the read must stall stall_ms longer than the model says.
  bool StallsRead(const std::string& path, uint64_t offset) const;

 private:
  // A uniform number in [0, 1) from (seed, salt, path, offset).
  double Uniform(uint64_t salt, const std::string& path, uint64_t offset) const;

  uint64_t seed_;
  double fail_rate_;
  double stall_rate_;
  std::unordered_set<std::string> fail_files_;
  std::unordered_set<std::string> fail_dirs_;
};

}  // namespace pfssim
