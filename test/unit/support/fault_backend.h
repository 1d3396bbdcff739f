// FaultBackend: a Backend for tests that forwards to a real one and injects
// faults, after LevelDB's FaultInjectionTestEnv. It can fail chosen operations
// on chosen paths with a chosen errno (always or the next N times), make a
// file look shorter than it is (short reads), sleep in every call, and count
// every call per operation and path.
//
// Thread-safe. Faults may be changed while calls are in flight; a file opened
// through this backend sees later changes. REQUIRES: the backend outlives the
// files it opened.
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "tiering/io/backend.h"

namespace tierfs::testing {

enum class Op { kStat, kList, kReadlink, kStatfs, kOpen, kRead };
inline constexpr size_t kOpCount = 6;

class FaultBackend final : public BackendWrapper {
 public:
  static constexpr int kAlways = -1;

  explicit FaultBackend(std::shared_ptr<Backend> target) : BackendWrapper(std::move(target)) {}

  // The next `times` calls of `op` on `rel` (every call with kAlways) return
  // -err without reaching the target. For kRead, `rel` is the file's path.
  // statfs has no path: use "".
  void Fail(Op op, const std::string& rel, int err, int times = kAlways) {
    std::lock_guard lock(mu_);
    rules_[{op, rel}] = Rule{err, times};
  }
  // Every call of `op`, on any path, returns -err.
  void FailAll(Op op, int err) {
    std::lock_guard lock(mu_);
    fail_all_[Index(op)] = err;
  }
  // File `rel` looks `size` bytes long to reads: a pread past `size` comes back
  // short, as after a truncation on SOURCE.
  void Shrink(const std::string& rel, uint64_t size) {
    std::lock_guard lock(mu_);
    shrunk_[rel] = size;
  }
  // Every call (and every pread) sleeps `delay` before it is forwarded.
  void SetDelay(std::chrono::microseconds delay) {
    std::lock_guard lock(mu_);
    delay_ = delay;
  }
  // Removes every fault and the delay; the counts stay.
  void Heal() {
    std::lock_guard lock(mu_);
    rules_.clear();
    fail_all_ = {};
    shrunk_.clear();
    delay_ = {};
  }

  // Calls of `op` made so far, failed ones included: in all, or on `rel`.
  uint64_t calls(Op op) const {
    std::lock_guard lock(mu_);
    return totals_[Index(op)];
  }
  uint64_t calls(Op op, const std::string& rel) const {
    std::lock_guard lock(mu_);
    auto it = calls_.find({op, rel});
    return it == calls_.end() ? 0 : it->second;
  }
  // Calls that returned an injected error.
  uint64_t injected_failures() const {
    std::lock_guard lock(mu_);
    return injected_;
  }

  int stat(const std::string& rel, struct stat* st) override {
    if (int err = Enter(Op::kStat, rel)) return err;
    return target()->stat(rel, st);
  }
  int list(const std::string& rel, std::vector<DirEntry>* out) override {
    if (int err = Enter(Op::kList, rel)) return err;
    return target()->list(rel, out);
  }
  int readlink(const std::string& rel, std::string* link) override {
    if (int err = Enter(Op::kReadlink, rel)) return err;
    return target()->readlink(rel, link);
  }
  int statfs(struct statvfs* out) override {
    if (int err = Enter(Op::kStatfs, "")) return err;
    return target()->statfs(out);
  }
  int open(const std::string& rel, std::unique_ptr<SourceFile>* out) override {
    if (int err = Enter(Op::kOpen, rel)) return err;
    std::unique_ptr<SourceFile> file;
    int r = target()->open(rel, &file);
    if (r == 0) *out = std::make_unique<FaultFile>(this, rel, std::move(file));
    return r;
  }

 private:
  class FaultFile final : public SourceFile {
   public:
    FaultFile(FaultBackend* backend, std::string rel, std::unique_ptr<SourceFile> file)
        : backend_(backend), rel_(std::move(rel)), file_(std::move(file)) {}
    ssize_t pread(void* buf, size_t n, uint64_t off) override {
      if (int err = backend_->Enter(Op::kRead, rel_)) return err;
      if (auto size = backend_->ShrunkSize(rel_)) {
        if (off >= *size) return 0;
        n = static_cast<size_t>(std::min<uint64_t>(n, *size - off));
      }
      return file_->pread(buf, n, off);
    }
    int fstat(struct stat* st) override { return file_->fstat(st); }

   private:
    FaultBackend* const backend_;
    const std::string rel_;
    const std::unique_ptr<SourceFile> file_;
  };

  struct Rule {
    int err;
    int remaining;  // kAlways, or calls left to fail
  };

  static size_t Index(Op op) { return static_cast<size_t>(op); }

  // Counts a call of `op` on `rel`, sleeps, and returns the injected -errno or 0.
  int Enter(Op op, const std::string& rel) {
    int err = 0;
    std::chrono::microseconds delay;
    {
      std::lock_guard lock(mu_);
      totals_[Index(op)]++;
      calls_[{op, rel}]++;
      delay = delay_;
      if (auto all = fail_all_[Index(op)]) err = *all;
      auto it = rules_.find({op, rel});
      if (err == 0 && it != rules_.end()) {
        err = it->second.err;
        if (it->second.remaining != kAlways && --it->second.remaining == 0) rules_.erase(it);
      }
      if (err != 0) injected_++;
    }
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    return -err;
  }

  std::optional<uint64_t> ShrunkSize(const std::string& rel) const {
    std::lock_guard lock(mu_);
    auto it = shrunk_.find(rel);
    if (it == shrunk_.end()) return std::nullopt;
    return it->second;
  }

  mutable std::mutex mu_;  // guards all below; a leaf lock, never held across I/O or a sleep
  std::map<std::pair<Op, std::string>, Rule> rules_;
  std::array<std::optional<int>, kOpCount> fail_all_{};
  std::map<std::string, uint64_t> shrunk_;
  std::chrono::microseconds delay_{0};
  std::map<std::pair<Op, std::string>, uint64_t> calls_;
  std::array<uint64_t, kOpCount> totals_{};
  uint64_t injected_ = 0;
};

}  // namespace tierfs::testing
