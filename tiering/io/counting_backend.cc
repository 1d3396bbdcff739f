#include "tiering/io/counting_backend.h"

#include <cerrno>

namespace tierfs {
namespace {

class CountingFile final : public SourceFile {
 public:
  CountingFile(std::unique_ptr<SourceFile> file, SourceCounters* counters)
      : file_(std::move(file)), counters_(counters) {}
  ssize_t pread(void* buf, size_t n, uint64_t off) override {
    ssize_t r = file_->pread(buf, n, off);
    counters_->reads.fetch_add(1, std::memory_order_relaxed);
    if (r < 0) {
      counters_->errors.fetch_add(1, std::memory_order_relaxed);
    } else {
      counters_->read_bytes.fetch_add(static_cast<uint64_t>(r), std::memory_order_relaxed);
    }
    return r;
  }
  int fstat(struct stat* st) override { return file_->fstat(st); }

 private:
  std::unique_ptr<SourceFile> file_;
  SourceCounters* counters_;  // owned by the CountingBackend, which outlives its files
};

class CountingDir final : public SourceDir {
 public:
  CountingDir(std::unique_ptr<SourceDir> dir, SourceCounters* counters)
      : dir_(std::move(dir)), counters_(counters) {}
  const std::vector<std::string>& names() const override { return dir_->names(); }
  int lstat(const std::string& name, struct stat* st) override {
    int r = dir_->lstat(name, st);
    counters_->stats.fetch_add(1, std::memory_order_relaxed);
    if (r < 0) counters_->errors.fetch_add(1, std::memory_order_relaxed);
    return r;
  }

 private:
  std::unique_ptr<SourceDir> dir_;
  SourceCounters* counters_;  // owned by the CountingBackend, which outlives the scan
};

}  // namespace

int CountingBackend::access_as(const std::string& rel, const AccessCaller& who, int mask) {
  int r = target()->access_as(rel, who, mask);
  if (r == -ENOSYS) return r;  // not asked
  counters_.access.fetch_add(1, std::memory_order_relaxed);
  if (r < 0 && r != -EACCES) counters_.errors.fetch_add(1, std::memory_order_relaxed);
  return r;
}

int CountingBackend::open_dir(const std::string& rel, std::unique_ptr<SourceDir>* out) {
  std::unique_ptr<SourceDir> dir;
  int r = Count(counters_.lists, target()->open_dir(rel, &dir));
  if (r == 0) *out = std::make_unique<CountingDir>(std::move(dir), &counters_);
  return r;
}

int CountingBackend::Count(std::atomic<uint64_t>& op, int result) {
  op.fetch_add(1, std::memory_order_relaxed);
  if (result < 0) counters_.errors.fetch_add(1, std::memory_order_relaxed);
  return result;
}

int CountingBackend::stat(const std::string& rel, struct stat* st) {
  return Count(counters_.stats, target()->stat(rel, st));
}

int CountingBackend::list(const std::string& rel, std::vector<DirEntry>* out) {
  return Count(counters_.lists, target()->list(rel, out));
}

int CountingBackend::readlink(const std::string& rel, std::string* target_path) {
  return Count(counters_.readlinks, target()->readlink(rel, target_path));
}

int CountingBackend::statfs(struct statvfs* out) {
  return Count(counters_.statfs, target()->statfs(out));
}

int CountingBackend::open(const std::string& rel, std::unique_ptr<SourceFile>* out) {
  std::unique_ptr<SourceFile> file;
  int r = Count(counters_.opens, target()->open(rel, &file));
  if (r == 0) *out = std::make_unique<CountingFile>(std::move(file), &counters_);
  return r;
}

void SourceCounters::VisitCounters(CounterVisitor& v) const {
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  v.Counter("meta_ops", meta_ops(),
            {"Metadata operations on SOURCE (stat, list, readlink, statfs, access)."});
  v.Counter("stats", load(stats), {"Calls to stat on SOURCE."});
  v.Counter("lists", load(lists), {"Directories listed on SOURCE."});
  v.Counter("readlinks", load(readlinks), {"Calls to readlink on SOURCE."});
  v.Counter("statfs", load(statfs), {"Calls to statfs on SOURCE."});
  v.Counter("opens", load(opens), {"Files opened on SOURCE."});
  v.Counter("access", load(access), {"Permission checks asked of SOURCE for a caller."});
  v.Counter("reads", load(reads), {"Read calls on SOURCE files."});
  v.Counter("read_bytes", load(read_bytes), {"Bytes read from SOURCE.", Unit::kBytes});
  v.Counter("errors", load(errors), {"Calls on SOURCE that returned an error."});
}

}  // namespace tierfs
