// TierJournal::Compact beside appenders: an append waits for no part of a
// compaction but the swap, and what was appended meanwhile is in the new
// journal.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "eventually.h"
#include "temp_tree.h"
#include "tiering/store/tier_journal.h"

namespace tierfs {
namespace {

using testing::TempTree;

// A FileIo whose writes to the temporary journal ("….tmp"), once armed,
// wait until released (at most 10 s).
class GatedTempIo final : public FileIoWrapper {
 public:
  GatedTempIo() : FileIoWrapper(NewPosixFileIo()) {}
  int open(const std::string& path, int flags, mode_t mode,
           std::unique_ptr<LocalFile>* out) override {
    std::unique_ptr<LocalFile> file;
    int r = target()->open(path, flags, mode, &file);
    if (r != 0) return r;
    const bool temp = path.size() > 4 && path.compare(path.size() - 4, 4, ".tmp") == 0;
    *out = temp ? std::make_unique<Gated>(this, std::move(file)) : std::move(file);
    return 0;
  }
  void Arm() {
    std::lock_guard lock(mu_);
    armed_ = true;
  }
  void Release() {
    std::lock_guard lock(mu_);
    armed_ = false;
    cv_.notify_all();
  }
  bool waiting() {
    std::lock_guard lock(mu_);
    return waiting_;
  }

 private:
  class Gated final : public LocalFileWrapper {
   public:
    Gated(GatedTempIo* io, std::unique_ptr<LocalFile> file)
        : LocalFileWrapper(std::move(file)), io_(io) {}
    ssize_t write(const void* buf, size_t n) override {
      io_->Wait();
      return target()->write(buf, n);
    }

   private:
    GatedTempIo* const io_;
  };
  void Wait() {
    std::unique_lock lock(mu_);
    waiting_ = armed_;
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !armed_; });
    waiting_ = false;
  }
  std::mutex mu_;  // guards the flags; a leaf lock
  std::condition_variable cv_;
  bool armed_ = false, waiting_ = false;
};

TierJournal::Record RecordOf(uint64_t seq) {
  return {7, ChunkOrigin{fmt::format("f{}", seq), 1, 1, 0, 1}};
}

TEST_CASE("TierJournal: appends go on while Compact writes the new journal, and are kept",
          "[tier_journal]") {
  TempTree dir;
  GatedTempIo io;
  TierJournal journal(&io, dir.Abs("journal"));
  REQUIRE(journal.Rewrite("src", {}) == 0);
  for (uint64_t seq = 1; seq <= 100; ++seq) {
    REQUIRE(journal.AppendPublish(seq, RecordOf(seq)) == 0);
    if (seq % 2 == 1) REQUIRE(journal.AppendRemove(seq) == 0);
  }
  io.Arm();
  auto compact = std::async(std::launch::async, [&journal] {
    return journal.Compact("src", [](uint64_t) { return true; });
  });
  REQUIRE(testing::Eventually([&io] { return io.waiting(); }));  // inside its write of the new one
  // Appends now, of a new record and of the removal of a compacted one.
  auto append = std::async(std::launch::async, [&journal] {
    return journal.AppendPublish(200, RecordOf(200)) + journal.AppendRemove(2);
  });
  const bool appended = append.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
  io.Release();
  CHECK(appended);  // it did not wait for the compaction's write
  CHECK(append.get() == 0);
  CHECK(compact.get() == 0);
  CHECK(journal.records() == 52);  // 50 records kept, two lines copied over
  REQUIRE(journal.AppendPublish(300, RecordOf(300)) == 0);  // into the new journal
  TierJournal::Entries loaded;
  REQUIRE(journal.Load("src", &loaded) == 0);
  CHECK(loaded.size() == 51);  // the 50 kept, 2 removed after the cut, 200 and 300 added
  CHECK(loaded.count(2) == 0);
  CHECK(loaded.count(4) == 1);
  CHECK(loaded.count(200) == 1);
  CHECK(loaded.count(300) == 1);
  CHECK(loaded.count(1) == 0);
}

}  // namespace
}  // namespace tierfs
