// HintParser, the lines: written to .tierfs/order and .tierfs/stage by
// several writers, split across writes, ended by a write at another offset,
// a flush or too many writers, and hostile streams (binary garbage, a 10 MB
// line). What a line names, and why one is rejected, is tested in
// hint_parser_resolve_test.cc; the dataset both use is in
// hint_parser_fixture.h.
#include "prefetch/planners/hint_parser.h"

#include <malloc.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <string>
#include <thread>

#include "hint_parser_fixture.h"

namespace tierfs {
namespace {

using testing::Files;
using testing::Writer;
using namespace std::chrono_literals;
using Result = HintParser::Result;

TEST_CASE("HintParser joins a line split across writes by one writer", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  parser.Feed(Writer(1), 0, "di", &r);
  parser.Feed(Writer(1), 2, "r/gam", &r);
  CHECK(r.files.empty());
  parser.Feed(Writer(1), 7, "ma\nbe", &r);
  CHECK(r.files == fs.Ids({"dir/gamma"}));
  parser.Feed(Writer(1), 12, "ta", &r);
  CHECK(r.files.size() == 1);
  parser.Feed(Writer(1), 14, "\nalpha\n", &r);
  CHECK(r.files == fs.Ids({"dir/gamma", "beta", "alpha"}));
  CHECK(r.valid == 3);
  CHECK(r.rejected == 0);
}

TEST_CASE("HintParser keeps two interleaved writers' lines apart", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  parser.Feed(Writer(1), 0, "dir/", &r);
  parser.Feed(Writer(2), 0, "alpha\nbe", &r);
  CHECK(r.files == fs.Ids({"alpha"}));
  parser.Feed(Writer(1), 4, "sub/delta\n", &r);
  parser.Feed(Writer(2), 8, "ta\n", &r);
  CHECK(r.files == fs.Ids({"alpha", "dir/sub/delta", "beta"}));
  CHECK(r.valid == 3);
  CHECK(r.rejected == 0);
}

TEST_CASE("HintParser ends a writer's tail when it writes at another offset", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  parser.Feed(Writer(1), 0, "alpha", &r);  // no newline: kept
  CHECK(r.files.empty());
  parser.Feed(Writer(1), 0, "beta\n", &r);  // the writer started over (a new open)
  CHECK(r.files == fs.Ids({"alpha", "beta"}));
  // A gap is a new start too: "dir/" is a line of its own (a directory: rejected).
  parser.Feed(Writer(1), 5, "dir/", &r);
  parser.Feed(Writer(1), 100, "gamma\n", &r);
  CHECK(r.files == fs.Ids({"alpha", "beta"}));
  CHECK(r.rejected == 2);  // "dir/" and "gamma" (not at the root)
}

TEST_CASE("HintParser FlushTails ends only tails older than the age", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  parser.Feed(Writer(1), 0, "alpha", &r);
  std::this_thread::sleep_for(300ms);
  parser.Feed(Writer(2), 0, "beta", &r);
  parser.FlushTails(150ms, &r);
  CHECK(r.files == fs.Ids({"alpha"}));
  parser.FlushTails(1h, &r);
  CHECK(r.files.size() == 1);
  parser.FlushTails(std::chrono::steady_clock::duration::zero(), &r);  // all
  CHECK(r.files == fs.Ids({"alpha", "beta"}));
  // A flushed writer continuing at its old offset starts a new line.
  parser.Feed(Writer(1), 5, "\n", &r);
  CHECK(r.files.size() == 2);
  CHECK(r.rejected == 0);
}

TEST_CASE("HintParser accepts CRLF and ignores empty lines", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  parser.Feed(Writer(1), 0, "\n\nalpha\r\n\r\n\n beta\nbeta\r\n\n", &r);
  CHECK(r.files == fs.Ids({"alpha", "beta"}));
  CHECK(r.valid == 2);
  CHECK(r.rejected == 1);  // " beta": names are taken as written
}

TEST_CASE("HintParser survives binary garbage", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", true);
  std::mt19937 rng(42);
  Result r;
  uint64_t off = 0;
  for (int i = 0; i < 200; ++i) {
    std::string piece(1 + rng() % 3000, '\0');
    for (char& c : piece) c = static_cast<char>(rng() & 0xff);
    parser.Feed(Writer(static_cast<uint64_t>(i % 7)), off, piece, &r);
    off += piece.size();
  }
  parser.FlushTails(std::chrono::steady_clock::duration::zero(), &r);
  CHECK(r.valid == 0);
  CHECK(r.files.empty());
  CHECK(r.rejected > 100);
  // And still works afterwards.
  Result ok;
  parser.Feed(Writer(99), 0, "alpha\n", &ok);
  CHECK(ok.files == fs.Ids({"alpha"}));
}

TEST_CASE("HintParser rejects a 10 MB line once and stores at most kMaxLine of it",
          "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  const std::string piece(64 << 10, 'x');
  Result r;
  parser.Feed(Writer(1), 0, "alpha\n", &r);
  uint64_t off = 6;
  const size_t heap_before = ::mallinfo2().uordblks;
  for (int i = 0; i < 160; ++i) {  // 10 MiB, one line, 64 KiB per write
    parser.Feed(Writer(1), off, piece, &r);
    off += piece.size();
  }
  const size_t heap_after = ::mallinfo2().uordblks;
  // (Under ASan mallinfo reports nothing and this holds trivially.)
  CHECK(heap_after < heap_before + 4 * HintParser::kMaxLine);
  CHECK(r.rejected == 0);  // not ended yet
  parser.Feed(Writer(1), off, "x\nbeta\n", &r);
  CHECK(r.rejected == 1);
  CHECK(r.files == fs.Ids({"alpha", "beta"}));

  SECTION("in a single write") {
    Result one;
    const std::string line(10 << 20, 'y');
    parser.Feed(Writer(2), 0, line, &one);
    parser.Feed(Writer(2), line.size(), "\ndir/gamma\n", &one);
    CHECK(one.rejected == 1);
    CHECK(one.files == fs.Ids({"dir/gamma"}));
  }
  SECTION("left unfinished, then flushed") {
    Result one;
    parser.Feed(Writer(3), 0, piece, &one);
    parser.FlushTails(std::chrono::steady_clock::duration::zero(), &one);
    CHECK(one.rejected == 1);
    CHECK(one.valid == 0);
  }
}

TEST_CASE("HintParser keeps at most kMaxWriters unfinished lines", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  const size_t writers = HintParser::kMaxWriters + 44;
  Result r;
  for (size_t w = 0; w < writers; ++w) parser.Feed(Writer(w), 0, "alpha", &r);
  // Each writer beyond the limit ended the stalest one's line.
  CHECK(r.files.size() == 44);
  CHECK(r.valid == 44);
  parser.FlushTails(std::chrono::steady_clock::duration::zero(), &r);
  CHECK(r.files.size() == writers);
  CHECK(r.rejected == 0);
}

}  // namespace
}  // namespace tierfs
