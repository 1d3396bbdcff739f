// StreamPlanner: one stream per declarer, reads matched by lead, look-ahead
// shared by need, epochs, directives, and hostile input bounded.
#include "prefetch/planners/stream_planner.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

namespace tierfs {
namespace {

constexpr uint64_t kNever = NextUses::kNever;
using Clock = StreamPlanner::Clock;

HintParser::Result Files(std::vector<NodeId> ids) {
  HintParser::Result r;
  r.files = std::move(ids);
  r.valid = r.files.size();
  return r;
}

// Files 100*s + i belong to stream s; none is resident unless `resident` says so.
struct Fixture {
  StreamPlanner planner{1000, 100000};
  std::set<NodeId> resident;
  std::vector<NodeId> Lookahead(size_t window) {
    std::vector<NodeId> changed;
    return planner.Lookahead(
        window, UINT64_MAX, [&](NodeId id) { return resident.count(id) > 0; },
        [](NodeId) { return uint64_t{1000}; }, &changed);
  }
  void Declare(uint64_t writer, std::vector<NodeId> ids) {
    StreamPlanner::Appended a;
    planner.Append(writer, Files(std::move(ids)), &a);
  }
};

TEST_CASE("StreamPlanner gives every declarer look-ahead, smallest lead first", "[streams]") {
  Fixture f;
  // Four ranks, each declaring its own 10 files.
  for (uint64_t r = 0; r < 4; ++r) {
    std::vector<NodeId> ids;
    for (NodeId i = 0; i < 10; ++i) ids.push_back(static_cast<NodeId>(100 * r + i));
    f.Declare(r + 1, ids);
  }
  CHECK(f.planner.streams() == 4);
  // Rank 0 is far ahead (its first 6 files resident), the others at 0: a
  // window of 6 goes to the others first, 2 each, before rank 0 gets any.
  for (NodeId i = 0; i < 6; ++i) f.resident.insert(i);
  std::vector<NodeId> next = f.Lookahead(6);
  REQUIRE(next.size() == 6);
  std::multiset<uint64_t> per_rank;
  for (NodeId id : next) per_rank.insert(id / 100);
  CHECK(per_rank.count(0) == 0);
  CHECK(per_rank.count(1) == 2);
  CHECK(per_rank.count(2) == 2);
  CHECK(per_rank.count(3) == 2);
  CHECK(f.planner.min_lead() == 0);
  // Once the others lead by 6 too, rank 0 is served again.
  for (uint64_t r = 1; r < 4; ++r) {
    for (NodeId i = 0; i < 7; ++i) f.resident.insert(static_cast<NodeId>(100 * r + i));
  }
  next = f.Lookahead(1);
  REQUIRE(next.size() == 1);
  CHECK(next[0] == 6);  // rank 0's lead 6 is the smallest
}

TEST_CASE("StreamPlanner matches a read to the stream that needs the file first", "[streams]") {
  Fixture f;
  f.Declare(1, {1, 2, 3, 4, 5});
  f.Declare(2, {9, 8, 5});  // file 5: lead 4 in stream 1, lead 2 in stream 2
  NextUses u = f.planner.NextUse(5);
  CHECK(u.next == 2);
  CHECK(u.after == 4);
  CHECK(f.planner.Consume(9, true));
  CHECK(f.planner.Consume(8, false));
  CHECK(f.planner.NextUse(5).next == 0);  // stream 2's next read
  CHECK(f.planner.Consume(5, true));      // ...is where the read goes
  u = f.planner.NextUse(5);
  CHECK(u.next == 4);  // stream 1's occurrence is still to come
  CHECK(u.after == kNever);
  CHECK_FALSE(f.planner.Consume(42, true));  // declared nowhere
  CHECK(f.planner.consumed() == 3);
}

TEST_CASE("StreamPlanner: a stream declared while another is half read", "[streams]") {
  Fixture f;
  f.Declare(1, {1, 2, 3, 4, 5, 6, 7, 8});
  for (NodeId id : {1, 2, 3, 4}) CHECK(f.planner.Consume(id, false));
  f.Declare(2, {11, 12, 13, 14});
  // The new stream starts at its own position 0: its first files come first,
  // though stream 1 is four reads further.
  std::vector<NodeId> next = f.Lookahead(2);
  REQUIRE(next.size() == 2);
  std::set<NodeId> got(next.begin(), next.end());
  CHECK((got.count(11) + got.count(5)) == 2);
  CHECK(f.planner.NextUse(11).next == 0);
  CHECK(f.planner.NextUse(5).next == 0);
}

TEST_CASE("StreamPlanner: //epoch drops what the page cache served unseen", "[streams]") {
  Fixture f;
  f.Declare(1, {1, 2, 3, 4});
  CHECK(f.planner.Consume(1, true));  // the rest was served by the page cache
  HintParser::Result next = Files({4, 3, 2, 1});
  next.marks.push_back({0, HintParser::Mark::Kind::kEpoch, {}});
  StreamPlanner::Appended a;
  f.planner.Append(1, next, &a);
  CHECK(a.files == 4);
  CHECK(f.planner.NextUse(4).next == 0);  // not an epoch behind
  CHECK(f.planner.NextUse(1).next == 3);
  CHECK(f.planner.NextUse(2).after == kNever);
  std::set<NodeId> changed(a.changed.begin(), a.changed.end());
  CHECK(changed == std::set<NodeId>{1, 2, 3, 4});  // the policy hears of every one
}

TEST_CASE("StreamPlanner: //stream names a stream shared by writers", "[streams]") {
  Fixture f;
  HintParser::Result r = Files({1, 2});
  r.marks.push_back({0, HintParser::Mark::Kind::kStream, "job-a"});
  StreamPlanner::Appended a;
  f.planner.Append(7, r, &a);
  f.Declare(7, {3});  // the writer's later lines stay in its named stream
  HintParser::Result other = Files({4});
  other.marks.push_back({0, HintParser::Mark::Kind::kStream, "job-a"});
  f.planner.Append(8, other, &a);
  CHECK(f.planner.streams() == 1);
  CHECK(f.planner.NextUse(4).next == 3);
}

TEST_CASE("StreamPlanner bounds streams and entries against hostile declarers", "[streams]") {
  StreamPlanner planner(1000, 50);
  StreamPlanner::Appended a;
  const auto t0 = Clock::now();
  for (uint64_t w = 1; w <= StreamPlanner::kMaxStreams + 10; ++w) {
    planner.Append(w, Files({static_cast<NodeId>(w)}), &a);
  }
  CHECK(planner.streams() == StreamPlanner::kMaxStreams);
  // The entry bound holds across streams: the 51st to 64th writers got no
  // room; later ones got the room of the oldest streams, dropped for them.
  CHECK(planner.declared() - planner.consumed() <= 50);
  CHECK(a.dropped == 14);
  CHECK(a.files + a.dropped == StreamPlanner::kMaxStreams + 10);
  // Idle streams are dropped by the look-ahead, their files reported.
  std::vector<NodeId> changed;
  planner.Lookahead(
      8, UINT64_MAX, [](NodeId) { return false; }, [](NodeId) { return uint64_t{1}; }, &changed,
      t0 + StreamPlanner::kIdle + std::chrono::seconds(1));
  CHECK(planner.streams() == 0);
  CHECK(changed.size() == a.files - 10);  // the ten oldest went with their streams
}

TEST_CASE("StreamPlanner look-ahead scans a bounded distance when all is resident", "[streams]") {
  Fixture f;
  std::vector<NodeId> ids;
  for (NodeId i = 0; i < 900; ++i) ids.push_back(i);
  f.Declare(1, ids);
  for (NodeId i = 0; i < 900; ++i) f.resident.insert(i);
  size_t asked = 0;
  std::vector<NodeId> changed;
  auto next = f.planner.Lookahead(
      8, UINT64_MAX,
      [&](NodeId) {
        asked++;
        return true;
      },
      [](NodeId) { return uint64_t{1}; }, &changed);
  CHECK(next.empty());
  CHECK(asked <= 4 * 8 + 2 * 64);
  CHECK(f.planner.min_lead() == asked);
}

// The items' names and series a walk of the planner's figures shows.
struct ItemNames : CounterVisitor {
  std::vector<std::string> names, series;
  void Counter(std::string_view, uint64_t, const About&) override {}
  void Gauge(std::string_view, double, const About&) override {}
  void Flag(std::string_view, bool, const About&) override {}
  void Text(std::string_view, std::string_view, std::string_view) override {}
  void Note(std::string_view, std::string_view) override {}
  void Histogram(std::string_view, const LatencyHistogram&, const About&) override {}
  void BeginGroup(std::string_view) override {}
  void EndGroup() override {}
  void BeginList(std::string_view, std::string_view) override {}
  void BeginItem(const Labels& labels, std::string_view s) override {
    names.emplace_back(labels.at(0).second);
    series.emplace_back(s);
  }
  void EndItem() override {}
  void EndList() override {}
};

TEST_CASE("StreamPlanner names streams by slot only where every user reads the stats",
          "[streams]") {
  for (bool show : {true, false}) {
    Fixture f;
    f.planner.set_show_names(show);
    HintParser::Result r = Files({1, 2});
    r.marks.push_back({0, HintParser::Mark::Kind::kStream, "alice-imagenet"});
    StreamPlanner::Appended a;
    f.planner.Append(7, r, &a);
    f.Declare(4242, {3});
    ItemNames seen;
    f.planner.VisitCounters(seen);
    std::sort(seen.names.begin(), seen.names.end());
    std::sort(seen.series.begin(), seen.series.end());
    if (show) {
      CHECK(seen.names == std::vector<std::string>{"alice-imagenet", "pid:4242"});
      CHECK(seen.series == std::vector<std::string>{"alice-imagenet", "process-1"});
    } else {
      CHECK(seen.names == std::vector<std::string>{"stream-0", "stream-1"});
      CHECK(seen.series == std::vector<std::string>{"stream-0", "stream-1"});
    }
  }
}

}  // namespace
}  // namespace tierfs
