// SourceReader: reads file bytes from SOURCE for the read path, checking them
// against the namespace snapshot. A file that vanished, became unreadable or
// shrank since the scan fails the read with -EIO (never short or wrong data);
// everything else keeps being served.
#pragma once

#include <atomic>
#include <cstdint>

#include "tiering/namespace/namespace.h"
#include "tiering/source/open_file_cache.h"

namespace tierfs {

class SourceReader {
 public:
  // `backend` and `ns` must outlive the reader.
  SourceReader(Backend* backend, const Namespace* ns, size_t max_open_files);

  // Reads up to `size` bytes of regular-file node `id` at `off` into `buf`.
  // Returns the byte count (fewer than `size` only at the snapshot's EOF) or
  // -errno. Thread-safe.
  ssize_t Read(NodeId id, uint64_t off, size_t size, char* buf);

  const OpenFileCache& open_files() const { return files_; }
  uint64_t failed_reads() const { return failed_reads_.load(std::memory_order_relaxed); }
  // SOURCE reads timed, and the microseconds they took in all (their mean
  // over a period tells whether SOURCE is slowing down).
  uint64_t timed_reads() const { return timed_reads_.load(std::memory_order_relaxed); }
  uint64_t read_micros() const { return read_us_.load(std::memory_order_relaxed); }

 private:
  void ReportFailure(NodeId id, const char* what, int err);

  const Namespace* const ns_;
  OpenFileCache files_;
  std::atomic<uint64_t> failed_reads_{0};
  std::atomic<uint64_t> timed_reads_{0}, read_us_{0};
};

}  // namespace tierfs
