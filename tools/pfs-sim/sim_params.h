// Parameters of the simulated parallel file system (pfs-sim).
//
// Every figure that shapes the simulation lives here, with its default, so a
// benchmark report can print the exact configuration it ran against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pfssim {

struct SimParams {
  // Metadata server: each lookup/getattr/open/opendir/readdir/statfs waits
  // this long (an MDS round trip) in one of `meta_parallel` service slots.
  double meta_ms = 1.0;
  unsigned meta_parallel = 16;
  // Object servers: each read request waits `read_ms`, then transfers its
  // bytes at `stream_mbps` (10^6 bytes/s), in one of `parallel` slots; all
  // slots share an aggregate link of `total_mbps`.
  double read_ms = 2.0;
  double stream_mbps = 100.0;
  double total_mbps = 400.0;
  unsigned parallel = 8;
  // Largest read request the kernel may send (bytes); bigger application
  // reads are split into requests of this size, each paying `read_ms`.
  uint32_t max_request = 1u << 20;
  // How long the kernel may cache entries and attributes (seconds). 0 makes
  // every path resolution a metadata round trip, as on an uncached client.
  double entry_timeout = 0.0;
  double attr_timeout = 0.0;
  // Fault injection. A read fails with EIO when its (file, offset) hashes
  // below `fail_rate` (deterministic: the same read fails again), or always
  // when its path is in `fail_files`. A read stalls `stall_ms` more when it
  // hashes below `stall_rate` (an independent hash).
  double fail_rate = 0.0;
  std::vector<std::string> fail_files;  // relative to the root, no leading '/'
  // Directories whose every opendir fails with EIO (relative to the root,
  // "" the root itself): a listing, hence a scan, that the PFS cannot serve.
  std::vector<std::string> fail_dirs;
  double stall_rate = 0.0;
  double stall_ms = 100.0;
  uint64_t seed = 1;
  // 1: an inode the kernel forgets gets a new number at its next lookup, as
  // on FUSE file systems without stable inode numbers (sshfs, rclone, s3fs).
  unsigned renumber = 0;
  // FUSE worker threads of the simulator itself, not a PFS parameter: the
  // handlers never wait for the model (the reply thread does), so a few
  // suffice, and every extra one costs a wake-up per request. Measured: a
  // 1.28 M-file scan at 64 requests in flight took 68 / 74 / 81 s with 2 / 4
  // / 8 threads (90 s with 32 and a shared fd). A few more than 2 because a
  // handler may wait for a cold backing store.
  unsigned threads = 4;
};

// Sets one `key=value` option. Returns an empty string on success, otherwise
// a message naming the key and the problem. Unknown keys are an error.
std::string SetParam(SimParams& params, const std::string& key, const std::string& value);

// True if `key` names a pfs-sim parameter (as opposed to a FUSE option).
bool IsParamKey(const std::string& key);

// Checks ranges across fields; returns an empty string when valid.
std::string Validate(const SimParams& params);

// The parameters as one JSON object (stable key order, same names as options).
std::string ParamsToJson(const SimParams& params);

// One line per option with its meaning and default, for --help.
std::string ParamsHelp();

}  // namespace pfssim
