// TierJournal: the record format, escaping, and loading (torn lines, removals).
#include "tiering/store/tier_journal.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "temp_tree.h"
#include "wrapping_file_io.h"

namespace tierfs {
namespace {

using testing::TempTree;

using Record = TierJournal::Record;

// The records of the journal at `path`, read through the local file system.
TierJournal::Entries Load(const std::string& path, const std::string& source = "src") {
  auto io = NewPosixFileIo();
  TierJournal::Entries out;
  REQUIRE(TierJournal(io.get(), path).Load(source, &out) == 0);
  return out;
}

// A record of chunk `o` in tier file 7.
Record In7(const ChunkOrigin& o) { return Record{7, o}; }

bool SameRecord(const Record& a, const Record& b) {
  const ChunkOrigin &x = a.origin, &y = b.origin;
  return a.file == b.file && x.path == y.path && x.file_size == y.file_size &&
         x.mtime_ns == y.mtime_ns && x.chunk == y.chunk && x.length == y.length &&
         x.ctime_ns == y.ctime_ns && x.ino == y.ino && x.offset == y.offset;
}

// The header of a journal of SOURCE "src".
constexpr const char* kHeader = "tierfs-journal 3 src\n";

TEST_CASE("TierJournal records round-trip paths with spaces, newlines, backslashes",
          "[tier_journal]") {
  const std::string path =
      GENERATE(as<std::string>{}, "plain", "with space", " lead and trail ", "new\nline", "\n",
               "back\\slash", "\\", "\\n literal", "tab\there", "a\\\nb", "\r");
  const Record in{TierJournal::kSeqLimit - 1,
                  ChunkOrigin{path, 123456789012ull, -42, 7, 65536, -1234567890123,
                              18446744073709551615ull, 7 * 65536ull}};
  const std::string line = TierJournal::FormatPublish(99, in);
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);  // one line, whatever the path holds
  char op = 0;
  uint64_t seq = 0;
  Record out;
  REQUIRE(TierJournal::ParseLine(line.substr(0, line.size() - 1), &op, &seq, &out));
  CHECK(op == 'P');
  CHECK(seq == 99);
  CHECK(SameRecord(in, out));
}

TEST_CASE("TierJournal::ParseLine rejects malformed records", "[tier_journal]") {
  char op;
  uint64_t seq;
  Record o;
  CHECK(TierJournal::ParseLine("P 5 1 0 1 1 1 1 1 1 p", &op, &seq, &o));
  CHECK(TierJournal::ParseLine("R 5", &op, &seq, &o));
  CHECK(op == 'R');
  CHECK(seq == 5);
  CHECK(TierJournal::ParseLine("R 9223372036854775807", &op, &seq, &o));  // the largest
  CHECK(seq == TierJournal::kSeqLimit - 1);
  for (const char* bad :
       {"", "R", "R x", "R 5 6", "X 5", "PP 5 1 0 1 1 1 1 1 1 p", "P 5 1 0 1 1 1 1 1 1",
        "P 5 1 0 1 1 1 1 1 1 ", "P 5 1 0 1 x 1 1 1 1 p", "P 5 1 0 1 1 1 1 1 1 bad\\escape",
        "P 5 1 0 1 1 1 1 1 1 trailing\\",
        "P 5 1 1 1 1 1 1 1 p",  // one number short (a version 2 record)
        // Numbers no tier hands out: they could wrap its counter.
        "R 9223372036854775808", "R 18446744073709551615", "R 18446744073709551616", "R -1",
        "P 18446744073709551615 1 0 1 1 1 1 1 1 p", "P 5 9223372036854775808 0 1 1 1 1 1 1 p"}) {
    INFO(bad);
    CHECK_FALSE(TierJournal::ParseLine(bad, &op, &seq, &o));
  }
}

TEST_CASE("TierJournal::Rewrite then Append, and Load replays them", "[tier_journal]") {
  TempTree dir;
  const std::string path = dir.Abs("journal");
  CHECK(Load(path).empty());  // missing
  {
    auto io = NewPosixFileIo();
    TierJournal journal(io.get(), path);
    CHECK(journal.AppendPublish(1, In7(ChunkOrigin{"x", 1, 1, 0, 1})) < 0);  // not opened yet
    TierJournal::Entries initial = {{3, In7(ChunkOrigin{"three", 30, 3, 0, 30})}};
    REQUIRE(journal.Rewrite("src", initial) == 0);
    CHECK(journal.AppendPublish(4, Record{2, ChunkOrigin{"four\nlines", 40, 4, 1, 10}}) == 0);
    CHECK(journal.AppendPublish(5, In7(ChunkOrigin{"five", 50, 5, 0, 50})) == 0);
    CHECK(journal.AppendRemove(3) == 0);
  }
  auto loaded = Load(path);
  REQUIRE(loaded.size() == 2);
  CHECK(SameRecord(loaded.at(4), Record{2, ChunkOrigin{"four\nlines", 40, 4, 1, 10}}));
  CHECK(SameRecord(loaded.at(5), In7(ChunkOrigin{"five", 50, 5, 0, 50})));
}

TEST_CASE("TierJournal::Load ignores a torn last line and bad lines", "[tier_journal]") {
  TempTree dir;
  const std::string one = TierJournal::FormatPublish(1, In7(ChunkOrigin{"one", 10, 1, 0, 10}));
  const std::string two = TierJournal::FormatPublish(2, In7(ChunkOrigin{"two", 20, 2, 0, 20}));
  SECTION("torn last line") {
    dir.Write("journal", kHeader + one + two.substr(0, two.size() - 1));
    auto loaded = Load(dir.Abs("journal"));
    CHECK(loaded.size() == 1);
    CHECK(loaded.count(1) == 1);
  }
  SECTION("torn in the middle of a number") {
    dir.Write("journal", kHeader + one + "P 2 2");
    CHECK(Load(dir.Abs("journal")).size() == 1);
  }
  SECTION("a garbled line in the middle") {
    dir.Write("journal", kHeader + one + "garbage here\n" + two);
    CHECK(Load(dir.Abs("journal")).size() == 2);
  }
  SECTION("a foreign file") {
    dir.Write("journal", "something else\n" + one);
    CHECK(Load(dir.Abs("journal")).empty());
  }
  SECTION("a journal of version 1") {
    dir.Write("journal", "tierfs-journal 1\n" + one);
    CHECK(Load(dir.Abs("journal")).empty());
  }
  SECTION("a journal of version 2 (one file per chunk)") {
    dir.Write("journal", "tierfs-journal 2 src\nP 1 10 30 1 0 0 0 one\n");
    CHECK(Load(dir.Abs("journal")).empty());
  }
}

TEST_CASE("TierJournal::Load keeps nothing of another SOURCE's journal", "[tier_journal]") {
  TempTree dir;
  auto io = NewPosixFileIo();
  TierJournal journal(io.get(), dir.Abs("journal"));
  REQUIRE(journal.Rewrite("/data/a ino 7", {{1, In7(ChunkOrigin{"f", 1, 1, 0, 1, 5, 6})}}) == 0);
  TierJournal::Entries out;
  bool foreign = true;
  REQUIRE(journal.Load("/data/a ino 7", &out, &foreign) == 0);
  CHECK(out.size() == 1);
  CHECK_FALSE(foreign);
  for (const char* other : {"/data/a ino 8", "/data/b ino 7", "/data/a ino 7 ", ""}) {
    INFO(other);
    REQUIRE(journal.Load(other, &out, &foreign) == 0);
    CHECK(out.empty());
    CHECK(foreign);
  }
}

TEST_CASE("TierJournal::Compact keeps the records asked for and appends go on", "[tier_journal]") {
  TempTree dir;
  const std::string path = dir.Abs("journal");
  auto io = NewPosixFileIo();
  TierJournal journal(io.get(), path);
  CHECK(journal.Compact("src", [](uint64_t) { return true; }) == -EBADF);  // not opened yet
  REQUIRE(journal.Rewrite("src", {}) == 0);
  for (uint64_t seq = 1; seq <= 1000; ++seq) {
    REQUIRE(journal.AppendPublish(seq, In7(ChunkOrigin{fmt::format("f{}", seq), 1, 1, 0, 1})) == 0);
    if (seq % 10 != 0) REQUIRE(journal.AppendRemove(seq) == 0);
  }
  CHECK(journal.records() == 1900);
  REQUIRE(journal.Compact("src", [](uint64_t seq) { return seq % 20 == 0; }) == 0);
  CHECK(journal.records() == 50);
  REQUIRE(journal.AppendPublish(2000, In7(ChunkOrigin{"late", 1, 1, 0, 1})) == 0);
  auto loaded = Load(path);
  CHECK(loaded.size() == 51);
  CHECK(loaded.count(20) == 1);
  CHECK(loaded.count(10) == 0);  // live, but not kept by this Compact
  CHECK(loaded.count(2000) == 1);
}

// A FileIo whose writes, once armed, wait (up to 5 s) until `n` of them are
// in flight at once: appenders that exclude each other never meet.
class RendezvousFileIo final : public testing::WrappingFileIo {
 public:
  explicit RendezvousFileIo(int n) : WrappingFileIo(NewPosixFileIo()), n_(n) {}
  void Arm() {
    std::lock_guard lock(mu_);
    armed_ = true;
  }
  int most_in_flight() const {
    std::lock_guard lock(mu_);
    return most_;
  }

 private:
  class File final : public LocalFileWrapper {
   public:
    File(RendezvousFileIo* io, std::unique_ptr<LocalFile> file)
        : LocalFileWrapper(std::move(file)), io_(io) {}
    ssize_t write(const void* buf, size_t n) override {
      io_->Meet();
      ssize_t r = target()->write(buf, n);
      io_->Leave();
      return r;
    }

   private:
    RendezvousFileIo* const io_;
  };

  std::unique_ptr<LocalFile> Wrap(std::unique_ptr<LocalFile> file) override {
    return std::make_unique<File>(this, std::move(file));
  }
  void Meet() {
    std::unique_lock lock(mu_);
    most_ = std::max(most_, ++in_flight_);
    cv_.notify_all();
    if (armed_) cv_.wait_for(lock, std::chrono::seconds(5), [&] { return most_ >= n_; });
  }
  void Leave() {
    std::lock_guard lock(mu_);
    in_flight_--;
  }

  const int n_;
  mutable std::mutex mu_;  // guards all below; a leaf lock
  std::condition_variable cv_;
  bool armed_ = false;
  int in_flight_ = 0, most_ = 0;
};

TEST_CASE("TierJournal appenders do not wait for each other's write", "[tier_journal]") {
  TempTree dir;
  RendezvousFileIo io(2);
  TierJournal journal(&io, dir.Abs("journal"));
  REQUIRE(journal.Rewrite("src", {}) == 0);
  io.Arm();
  std::vector<std::thread> appenders;
  int results[2] = {-1, -1};  // no Catch2 assertion in a thread: they are not thread-safe
  for (uint64_t seq : {1, 2}) {
    appenders.emplace_back([&journal, &results, seq] {
      results[seq - 1] =
          journal.AppendPublish(seq, In7(ChunkOrigin{fmt::format("f{}", seq), 1, 1, 0, 1}));
    });
  }
  for (auto& t : appenders) t.join();
  CHECK(results[0] == 0);
  CHECK(results[1] == 0);
  CHECK(io.most_in_flight() == 2);  // both were inside write(2) at once
  CHECK(Load(dir.Abs("journal")).size() == 2);
}

}  // namespace
}  // namespace tierfs
