// File access of the epoch loader: listing a dataset and reading whole files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bench {

// Every regular file below `root`, as full paths, sorted. Entries whose name
// starts with '.' (control directories such as .pfs-sim or .tierfs) are
// skipped. Throws std::runtime_error with the path on a listing error.
std::vector<std::string> ListFiles(const std::string& root);

// Opens, reads to the end in `block`-byte reads into a page-aligned buffer
// (one per thread, so a direct-io mount sees one request per read), closes.
// Returns the bytes read or -errno.
int64_t ReadWholeFile(const std::string& path, size_t block);

// The "ops" counters of a pfs-sim stats file (<mnt>/.pfs-sim/stats), or of
// any JSON with flat "name": integer pairs after the key `section`. Empty
// map if the file cannot be read.
std::map<std::string, uint64_t> ReadCounters(const std::string& stats_path,
                                             const std::string& section = "ops");

// after - before, per key present in `after`.
std::map<std::string, uint64_t> CounterDelta(const std::map<std::string, uint64_t>& before,
                                             const std::map<std::string, uint64_t>& after);

}  // namespace bench
