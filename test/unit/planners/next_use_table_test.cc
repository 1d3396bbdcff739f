// NextUseTable: what the planner writes is what the policy reads. The table
// follows the planner's own answer (StreamPlanner::NextUse) as streams are
// declared, read in step, start epochs and are cleared; uses count down by
// cursor; a reader inside a file makes its coming chunks needed now.
#include "tiering/store/next_use_table.h"

#include <catch2/catch.hpp>
#include <random>

#include "prefetch/planners/stream_planner.h"

namespace tierfs {
namespace {

constexpr uint64_t kNever = NextUses::kNever;
constexpr size_t kFiles = 200;

HintParser::Result Files(std::vector<NodeId> ids) {
  HintParser::Result r;
  r.files = std::move(ids);
  r.valid = r.files.size();
  return r;
}

void CheckSame(const StreamPlanner& planner, const NextUseTable& table) {
  for (NodeId id = 0; id < kFiles; ++id) {
    const NextUses want = planner.NextUse(id);
    const NextUses got = table.NextUse({id, 0});
    INFO("file " << id);
    REQUIRE(got.next == want.next);
    REQUIRE(got.after == want.after);
    REQUIRE(got.next_id == want.next_id);
  }
}

TEST_CASE("NextUseTable answers as the planner while ranks read in step", "[next_use]") {
  NextUseTable table(kFiles);
  table.SetActive(true);
  StreamPlanner planner(kFiles, 100000, &table);
  std::mt19937 rng(7);
  // Four ranks, two epochs each: each a shuffled share of the files
  // (DistributedSampler). Where several streams declare one file the table
  // keeps the nearest use as of the last change, which stays exact only
  // while the streams advance in step.
  std::vector<std::vector<NodeId>> orders(4);
  for (size_t r = 0; r < orders.size(); ++r) {
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<NodeId> share;
      for (NodeId id = static_cast<NodeId>(r); id < kFiles; id += 4) share.push_back(id);
      std::shuffle(share.begin(), share.end(), rng);
      orders[r].insert(orders[r].end(), share.begin(), share.end());
    }
    StreamPlanner::Appended a;
    planner.Append(r + 1, Files(orders[r]), &a);
  }
  CheckSame(planner, table);
  // Each rank reads its next file in turn (in step), consuming as it goes.
  std::vector<size_t> at(orders.size(), 0);
  for (int step = 0; step < 40; ++step) {
    for (size_t r = 0; r < orders.size(); ++r) {
      planner.Consume(orders[r][at[r]++], true);
    }
    CheckSame(planner, table);
  }
  // A new epoch of rank 2 abandons what it did not read.
  HintParser::Result epoch = Files({7, 8, 9});
  epoch.marks.push_back({0, HintParser::Mark::Kind::kEpoch, ""});
  StreamPlanner::Appended a;
  planner.Append(3, epoch, &a);
  CheckSame(planner, table);
  planner.Clear();
  CheckSame(planner, table);
  CHECK(table.NextUse({7, 0}).next == kNever);
}

TEST_CASE("NextUseTable counts down by cursor, and a reader's chunks are needed now",
          "[next_use]") {
  NextUseTable table(10);
  CHECK(table.NextUse({3, 0}).next == kNever);  // nothing written: never
  table.Set(3, {{100, 1}, {150, 2}, 42});
  CHECK(table.NextUse({3, 0}).next == kNever);  // not active (not order mode)
  table.SetActive(true);
  CHECK(table.NextUse({3, 0}).next == 100);
  CHECK(table.NextUse({3, 0}).after == 150);
  CHECK(table.NextUse({3, 0}).next_id == 42);
  table.SetCursor(1, 60);  // stream 1's reader advanced 60 reads
  CHECK(table.NextUse({3, 0}).next == 40);
  CHECK(table.NextUse({3, 0}).after == 150);  // stream 2 did not
  table.SetCursor(1, 500);                    // past it: a straggler, needed now
  CHECK(table.NextUse({3, 0}).next == 0);

  table.Set(5, {{NextUseTable::kNever, 0}, {NextUseTable::kNever, 0}, kNever});
  table.SetReading(5, 4, 77);                   // a reader in chunk 4 of file 5
  CHECK(table.NextUse({5, 2}).next == kNever);  // behind it
  CHECK(table.NextUse({5, 3}).next == 0);       // just behind: read-ahead may still fetch it
  CHECK(table.NextUse({5, 3}).next_id == 77);
  CHECK(table.NextUse({5, 9}).next == 0);
  table.ClearReading(5);
  CHECK(table.NextUse({5, 9}).next == kNever);
  CHECK(table.NextUse({99, 0}).next == kNever);  // not a file of the namespace
}

}  // namespace
}  // namespace tierfs
