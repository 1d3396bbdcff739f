#include "tiering/source/source_reader.h"

#include <cerrno>
#include <chrono>
#include <cstring>

#include "tiering/base/log.h"

namespace tierfs {

SourceReader::SourceReader(Backend* backend, const Namespace* ns, size_t max_open_files)
    : ns_(ns), files_(backend, ns, max_open_files) {}

ssize_t SourceReader::Read(NodeId id, uint64_t off, size_t size, char* buf) {
  const uint64_t file_size = ns_->node(id).size;
  if (off >= file_size || size == 0) return 0;
  const size_t expected = static_cast<size_t>(std::min<uint64_t>(size, file_size - off));
  std::shared_ptr<SourceFile> file;
  int err = files_.Get(id, &file);
  if (err < 0) {
    ReportFailure(id, "open", err);
    return -EIO;
  }
  const auto start = std::chrono::steady_clock::now();
  ssize_t n = file->pread(buf, expected, off);
  read_us_.fetch_add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                               std::chrono::steady_clock::now() - start)
                                               .count()),
                     std::memory_order_relaxed);
  timed_reads_.fetch_add(1, std::memory_order_relaxed);
  if (n < 0) {
    ReportFailure(id, "read", static_cast<int>(n));
    return -EIO;
  }
  if (static_cast<size_t>(n) < expected) {
    // SOURCE shrank after the scan: serving fewer bytes would corrupt the
    // reader's view of a file whose size it already knows.
    ReportFailure(id, "read (file shrank on SOURCE)", -EIO);
    return -EIO;
  }
  return n;
}

void SourceReader::ReportFailure(NodeId id, const char* what, int err) {
  uint64_t n = failed_reads_.fetch_add(1, std::memory_order_relaxed);
  // A vanished dataset could fail every read: log the first few, then every 1000th.
  if (n < 10 || n % 1000 == 0) {
    TIERFS_LOG(kWarning, "SOURCE {} of '{}' failed: {} (failure #{}); the read returns EIO", what,
               ns_->Path(id), std::strerror(-err), n + 1);
  }
}

}  // namespace tierfs
