// Counters of every operation pfs-sim serves, readable while mounted as JSON
// through <mountpoint>/.pfs-sim/stats. Counters only grow; a client takes
// differences between two snapshots. Lock-free: any thread may bump them.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace pfssim {

struct OpCounters {
  // Metadata operations (each pays meta_ms).
  std::atomic<uint64_t> lookups{0};
  std::atomic<uint64_t> getattrs{0};
  std::atomic<uint64_t> opens{0};
  std::atomic<uint64_t> opendirs{0};
  std::atomic<uint64_t> readdirs{0};
  std::atomic<uint64_t> statfs{0};
  // LOOKUPs between request and reply now, and the most ever at once: the
  // kernel runs one directory's lookups one at a time unless the session
  // negotiated FUSE_PARALLEL_DIROPS.
  std::atomic<uint64_t> lookups_in_flight{0};
  std::atomic<uint64_t> lookups_in_flight_max{0};
  // Free operations (no latency), counted for completeness.
  std::atomic<uint64_t> releases{0};
  std::atomic<uint64_t> forgets{0};
  // Data.
  std::atomic<uint64_t> reads{0};      // requests that returned data
  std::atomic<uint64_t> eof_reads{0};  // reads at end of file: free, never fail
  std::atomic<uint64_t> read_bytes{0};
  std::atomic<uint64_t> read_errors{0};    // injected EIO replies
  std::atomic<uint64_t> stalls{0};         // injected stalls
  std::atomic<uint64_t> source_errors{0};  // real errors from the backing directory

  static void Bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
    counter.fetch_add(by, std::memory_order_relaxed);
  }

  // A LOOKUP starts (raises the maximum) and ends.
  void LookupBegins();
  void LookupEnds() { lookups_in_flight.fetch_sub(1, std::memory_order_relaxed); }

  // Sum of the metadata operations above.
  uint64_t MetaOps() const;

  // A JSON object of all counters plus "meta_ops".
  std::string ToJson() const;
};

}  // namespace pfssim
