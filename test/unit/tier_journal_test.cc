// TierJournal: the record format, escaping, and loading (torn lines, removals).
#include "tiering/tier_journal.h"

#include <catch2/catch.hpp>
#include <string>

#include "temp_tree.h"

namespace tierfs {
namespace {

using testing::TempTree;

bool SameOrigin(const ChunkOrigin& a, const ChunkOrigin& b) {
  return a.path == b.path && a.file_size == b.file_size && a.mtime_ns == b.mtime_ns &&
         a.chunk == b.chunk && a.length == b.length;
}

TEST_CASE("TierJournal records round-trip paths with spaces, newlines, backslashes",
          "[tier_journal]") {
  const std::string path =
      GENERATE(as<std::string>{}, "plain", "with space", " lead and trail ", "new\nline", "\n",
               "back\\slash", "\\", "\\n literal", "tab\there", "a\\\nb", "\r");
  const ChunkOrigin in{path, 123456789012ull, -42, 7, 65536};
  const std::string line = TierJournal::FormatPublish(99, in);
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);  // one line, whatever the path holds
  char op = 0;
  uint64_t seq = 0;
  ChunkOrigin out;
  REQUIRE(TierJournal::ParseLine(line.substr(0, line.size() - 1), &op, &seq, &out));
  CHECK(op == 'P');
  CHECK(seq == 99);
  CHECK(SameOrigin(in, out));
}

TEST_CASE("TierJournal::ParseLine rejects malformed records", "[tier_journal]") {
  char op;
  uint64_t seq;
  ChunkOrigin o;
  CHECK(TierJournal::ParseLine("R 5", &op, &seq, &o));
  CHECK(op == 'R');
  CHECK(seq == 5);
  for (const char* bad :
       {"", "R", "R x", "R 5 6", "X 5", "PP 5 1 1 1 1 p", "P 5 1 1 1 1", "P 5 1 1 1 1 ",
        "P 5 1 1 x 1 p", "P 5 1 1 1 1 bad\\escape", "P 5 1 1 1 1 trailing\\"}) {
    INFO(bad);
    CHECK_FALSE(TierJournal::ParseLine(bad, &op, &seq, &o));
  }
}

TEST_CASE("TierJournal::Rewrite then Append, and Load replays them", "[tier_journal]") {
  TempTree dir;
  const std::string path = dir.Abs("journal");
  CHECK(TierJournal::Load(path).empty());  // missing
  {
    TierJournal journal;
    CHECK(journal.AppendPublish(1, ChunkOrigin{"x", 1, 1, 0, 1}) < 0);  // not opened yet
    std::map<uint64_t, ChunkOrigin> initial = {{3, ChunkOrigin{"three", 30, 3, 0, 30}}};
    REQUIRE(journal.Rewrite(path, initial) == 0);
    CHECK(journal.AppendPublish(4, ChunkOrigin{"four\nlines", 40, 4, 1, 10}) == 0);
    CHECK(journal.AppendPublish(5, ChunkOrigin{"five", 50, 5, 0, 50}) == 0);
    CHECK(journal.AppendRemove(3) == 0);
  }
  auto loaded = TierJournal::Load(path);
  REQUIRE(loaded.size() == 2);
  CHECK(SameOrigin(loaded.at(4), ChunkOrigin{"four\nlines", 40, 4, 1, 10}));
  CHECK(SameOrigin(loaded.at(5), ChunkOrigin{"five", 50, 5, 0, 50}));
}

TEST_CASE("TierJournal::Load ignores a torn last line and bad lines", "[tier_journal]") {
  TempTree dir;
  const std::string one = TierJournal::FormatPublish(1, ChunkOrigin{"one", 10, 1, 0, 10});
  const std::string two = TierJournal::FormatPublish(2, ChunkOrigin{"two", 20, 2, 0, 20});
  SECTION("torn last line") {
    dir.Write("journal", "tierfs-journal 1\n" + one + two.substr(0, two.size() - 1));
    auto loaded = TierJournal::Load(dir.Abs("journal"));
    CHECK(loaded.size() == 1);
    CHECK(loaded.count(1) == 1);
  }
  SECTION("torn in the middle of a number") {
    dir.Write("journal", "tierfs-journal 1\n" + one + "P 2 2");
    CHECK(TierJournal::Load(dir.Abs("journal")).size() == 1);
  }
  SECTION("a garbled line in the middle") {
    dir.Write("journal", "tierfs-journal 1\n" + one + "garbage here\n" + two);
    CHECK(TierJournal::Load(dir.Abs("journal")).size() == 2);
  }
  SECTION("a foreign file") {
    dir.Write("journal", "something else\n" + one);
    CHECK(TierJournal::Load(dir.Abs("journal")).empty());
  }
}

}  // namespace
}  // namespace tierfs
