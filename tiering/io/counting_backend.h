// CountingBackend: counts every operation that reaches SOURCE, so the daemon
// can prove what it costs the PFS (e.g. zero metadata operations after the
// namespace scan).
#pragma once

#include <atomic>
#include <cstdint>

#include "tiering/base/counter_visitor.h"
#include "tiering/io/backend.h"

namespace tierfs {

struct SourceCounters {
  std::atomic<uint64_t> stats{0};      // stat()
  std::atomic<uint64_t> lists{0};      // list() (one per directory listed)
  std::atomic<uint64_t> readlinks{0};  // readlink()
  std::atomic<uint64_t> statfs{0};     // statfs()
  std::atomic<uint64_t> opens{0};      // open()
  std::atomic<uint64_t> access{0};     // access_as(): a caller's permission asked of SOURCE
  std::atomic<uint64_t> reads{0};      // SourceFile::pread() calls
  std::atomic<uint64_t> read_bytes{0};
  std::atomic<uint64_t> errors{0};  // any call that returned -errno

  // Metadata operations: everything but opens and reads.
  uint64_t meta_ops() const { return stats + lists + readlinks + statfs + access; }
  void VisitCounters(CounterVisitor& v) const;
};

class CountingBackend final : public BackendWrapper {
 public:
  explicit CountingBackend(std::shared_ptr<Backend> target) : BackendWrapper(std::move(target)) {}

  const SourceCounters& counters() const { return counters_; }

  int stat(const std::string& rel, struct stat* st) override;
  int list(const std::string& rel, std::vector<DirEntry>* out) override;
  int readlink(const std::string& rel, std::string* target) override;
  int statfs(struct statvfs* out) override;
  int open(const std::string& rel, std::unique_ptr<SourceFile>* out) override;
  // Forwards to the target's open_dir: one list, then one stat per lstat.
  int open_dir(const std::string& rel, std::unique_ptr<SourceDir>* out) override;
  int access_as(const std::string& rel, const AccessCaller& who, int mask) override;

 private:
  int Count(std::atomic<uint64_t>& op, int result);

  SourceCounters counters_;
};

}  // namespace tierfs
