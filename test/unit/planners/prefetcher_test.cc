// Prefetcher through Engine: the control files (order, stage, mode), the
// reader's position, promotion ahead of the reader, and the stats.
#include "prefetch/planners/prefetcher.h"

#include <fmt/format.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>

#include "eventually.h"
#include "fs/telemetry/counter_json.h"
#include "prefetch/assembly/engine.h"
#include "require_ok.h"
#include "scan_tree.h"

namespace tierfs {
namespace {

using testing::TempTree;
constexpr uint64_t kNever = OrderPlan::kNever;

// A writer of the control files with thread id `id`, as root.
HintWriter Writer(uint64_t id) { return HintWriter{id, AccessCaller{}}; }

// SOURCE: f0..f5 of 10 KB and a directory d with d/g0, d/g1 (and with `big`,
// a file "big" of 5 chunks); a Engine over it (64 KiB chunks, `ram`
// bytes of RAM tier) mounted at /mnt.
class Store {
 public:
  explicit Store(uint64_t ram, PrefetchMode mode = PrefetchMode::kOnAccess, bool big = false) {
    for (int i = 0; i < 6; ++i) tree_.Write(fmt::format("f{}", i), std::string(10000, 'f'));
    if (big) tree_.Write("big", std::string(4 * kChunk + 100, 'b'));
    tree_.Mkdir("d");
    tree_.Write("d/g0", "g0");
    tree_.Write("d/g1", "g1");
    backend_ = RequireOk(NewPosixBackend(tree_.root()));
    ns_ = testing::ScanTree(tree_);
    reader_ = std::make_unique<SourceReader>(backend_.get(), ns_.get(), 16);
    TieringConfig config;
    config.ram = ram;
    config.chunk_size = kChunk;
    config.promote_threads = 2;
    config.prefetch.mode = mode;
    config.prefetch.mountpoint = "/mnt";
    store_ = RequireOk(Engine::Open(config, ns_.get(), reader_.get(), 0));
  }

  static constexpr uint64_t kChunk = 64 << 10;
  Prefetcher& prefetcher() { return store_->prefetcher(); }
  // What the planner wrote in the store's next-use table.
  NextUses NextUse(ChunkKey key) const { return store_->chunks()->next_uses().NextUse(key); }
  Engine& store() { return *store_; }
  NodeId Id(const std::string& rel) const { return *ns_->Resolve(rel); }

  // The number after "key": in the stats, searching from `section`.
  uint64_t Stat(const std::string& section, const std::string& key) const {
    JsonCounterWriter writer;
    store_->VisitCounters(writer);
    std::string json = writer.Finish();
    size_t at = json.find("\"" + section + "\": {");
    REQUIRE(at != std::string::npos);
    at = json.find("\"" + key + "\": ", at);
    REQUIRE(at != std::string::npos);
    return std::stoull(json.substr(at + key.size() + 4));
  }
  // Waits up to 5 s for Stat(section, key) to reach `want`.
  bool StatReaches(const std::string& section, const std::string& key, uint64_t want) const {
    return testing::Eventually([&] { return Stat(section, key) >= want; });
  }

 private:
  TempTree tree_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Namespace> ns_;
  std::unique_ptr<SourceReader> reader_;
  std::unique_ptr<Engine> store_;  // last: destroyed first
};

TEST_CASE("Prefetcher WriteOrder declares files and refuses only all-invalid writes",
          "[prefetcher]") {
  Store s(1 << 20, PrefetchMode::kOrder);
  Prefetcher& p = s.prefetcher();
  CHECK(p.WriteOrder(Writer(1), 0, "f0\n/mnt/f1\n") == 11);
  CHECK(p.WriteOrder(Writer(1), 11, "nope\n/mnt2/f2\n") == -EINVAL);
  CHECK(p.WriteOrder(Writer(1), 25, "f2\nnope\n") == 8);  // some valid: accepted
  CHECK(p.WriteOrder(Writer(1), 33, "f") == 1);           // no complete line yet
  CHECK(p.WriteOrder(Writer(1), 34, "3\nd\n") == 4);      // f3 completed; d is a directory
  CHECK(s.Stat("order", "declared") == 4);
  CHECK(s.Stat("order", "valid_lines") == 4);
  CHECK(s.Stat("order", "rejected_lines") == 4);
  CHECK(s.NextUse({s.Id("f0"), 0}).next == 0);
  CHECK(s.NextUse({s.Id("f0"), 0}).after == kNever);
  CHECK(s.NextUse({s.Id("f3"), 0}).next == 3);
  CHECK(s.NextUse({s.Id("f5"), 0}).next == kNever);
  CHECK(p.WriteOrder(Writer(1), 38, "f0\n") == 3);  // a second epoch, same writer
  CHECK(s.NextUse({s.Id("f0"), 0}).after == 4);
  CHECK(p.WriteOrder(Writer(2), 0, "f0\n") == 3);  // another process: its own stream
  CHECK(s.NextUse({s.Id("f0"), 0}).after == 0);    // its first read is f0
  CHECK(s.Stat("order", "active_streams") == 2);

  p.ClearOrder();
  CHECK(s.Stat("order", "declared") == 0);
  CHECK(s.NextUse({s.Id("f0"), 0}).next == kNever);
  CHECK(p.WriteOrder(Writer(1), 0, "f5\n") == 3);
  CHECK(s.NextUse({s.Id("f5"), 0}).next == 0);
}

TEST_CASE("Prefetcher OnRead consumes the order only at offset 0 and in order mode",
          "[prefetcher]") {
  Store s(1 << 20, PrefetchMode::kOrder);
  Prefetcher& p = s.prefetcher();
  REQUIRE(p.WriteOrder(Writer(1), 0, "f0\nf1\nf0\n") == 9);
  p.OnRead(s.Id("f0"), 4096, 1, false);  // a later piece of the same read
  CHECK(s.Stat("order", "consumed") == 0);
  p.OnRead(s.Id("f1"), 0, 1, false);
  CHECK(s.Stat("order", "consumed") == 1);
  CHECK(s.Stat("order", "position") == 2);
  CHECK(s.NextUse({s.Id("f0"), 0}).next == 0);  // a straggler
  p.OnRead(s.Id("f0"), 0, 1, false);
  // Next uses are leads: f0's next occurrence (position 2) is the stream's
  // next read.
  CHECK(s.NextUse({s.Id("f0"), 0}).next == 0);
  CHECK(s.Stat("order", "position") == 2);
  p.OnRead(s.Id("f5"), 0, 1, false);  // undeclared
  CHECK(s.Stat("order", "consumed") == 2);

  REQUIRE(p.WriteMode("on-access\n") > 0);
  p.OnRead(s.Id("f0"), 0, 1, false);
  CHECK(s.Stat("order", "consumed") == 2);
  CHECK(s.NextUse({s.Id("f0"), 0}).next == kNever);  // no order outside order mode
}

TEST_CASE("Prefetcher WriteMode switches modes and needs a tier to promote", "[prefetcher]") {
  Store s(1 << 20);
  Prefetcher& p = s.prefetcher();
  CHECK(p.ModeText() == "on-access\n");
  CHECK(p.WriteMode("order\n") > 0);
  CHECK(p.ModeText() == "order\n");
  CHECK(p.WriteMode("stage-in\r\n") > 0);
  CHECK(p.ModeText() == "stage-in\n");
  CHECK(p.WriteMode("turbo\n") == -EINVAL);
  CHECK(p.WriteMode("") == -EINVAL);
  CHECK(p.ModeText() == "stage-in\n");

  Store none(0);
  Prefetcher& q = none.prefetcher();
  CHECK(q.WriteMode("order\n") == -EOPNOTSUPP);
  CHECK(q.WriteMode("stage-in") == -EOPNOTSUPP);
  CHECK(q.WriteMode("on-access\n") > 0);
  // Hints are still parsed and counted without tiers.
  CHECK(q.WriteOrder(Writer(1), 0, "f0\nnope\n") == 8);
  CHECK(none.Stat("order", "valid_lines") == 1);
  CHECK(none.Stat("order", "rejected_lines") == 1);
  CHECK(q.WriteStage(Writer(1), 0, "nope\n") == -EINVAL);
}

TEST_CASE("Prefetcher WriteStage promotes the named files", "[prefetcher]") {
  Store s(1 << 20);
  s.store().Start();
  Prefetcher& p = s.prefetcher();
  CHECK(p.WriteStage(Writer(1), 0, "f1\n/mnt/d\nnope\n") == 15);
  CHECK(s.Stat("stage", "requested_files") == 3);  // f1, d/g0, d/g1
  CHECK(s.Stat("stage", "valid_lines") == 2);
  CHECK(s.Stat("stage", "rejected_lines") == 1);
  REQUIRE(s.StatReaches("stage", "done_files", 3));
  CHECK(s.Stat("promotions", "files_resident") == 3);
  CHECK(s.Stat("stage", "done_bytes") == 10000 + 2 + 2);
  CHECK(p.WriteStage(Writer(1), 15, "f1\n") == 3);  // already asked for: not again
  CHECK(s.Stat("stage", "requested_files") == 3);
}

TEST_CASE("Prefetcher's planner thread survives a throw (issue 11 item 9)", "[prefetcher]") {
  Store s(1 << 20);
  std::atomic<int> rounds{0};
  s.prefetcher().set_round_hook([&rounds] {
    if (rounds.fetch_add(1) < 3) throw std::bad_alloc();
  });
  s.store().Start();
  // Late stage lines (no newline) are taken only by the planner thread.
  CHECK(s.prefetcher().WriteStage(Writer(1), 0, "f1") == 2);
  REQUIRE(s.StatReaches("stage", "done_files", 1));
  CHECK(s.Stat("prefetch", "planner_errors") == 3);
  CHECK(rounds.load() > 3);
}

TEST_CASE("Prefetcher in order mode promotes declared files ahead of the reader", "[prefetcher]") {
  Store s(1 << 20, PrefetchMode::kOrder);
  s.store().Start();
  REQUIRE(s.prefetcher().WriteOrder(Writer(1), 0, "f4\nf2\nf0\n") == 9);
  REQUIRE(s.StatReaches("promotions", "files_resident", 3));
  CHECK(s.Stat("promotions", "files_resident") == 3);
  CHECK(s.Stat("stage", "requested_files") == 0);
  CHECK(s.Stat("order", "lookahead") == 64);
}

TEST_CASE("Prefetcher: the chunks of a file being read stay needed until its reader passes them",
          "[prefetcher]") {
  // A file's declared use is consumed by its read at offset 0. Its later
  // chunks counted as never needed again from then on: with one epoch
  // declared at a time they were the first victims while their reader was
  // on its way to them (shards-2x read 11% of its dataset twice in epoch 1).
  Store s(1 << 20, PrefetchMode::kOrder, /*big=*/true);
  s.store().Start();
  Prefetcher& p = s.prefetcher();
  const NodeId big = s.Id("big");
  REQUIRE(p.WriteOrder(Writer(1), 0, "big\nf0\n") == 7);
  CHECK(s.NextUse({big, 4}).next == 0);
  p.OnRead(big, 0, 4096, false);  // consumed; no later use is declared
  for (uint32_t c = 0; c < 5; ++c) CHECK(s.NextUse({big, c}).next == 0);
  CHECK(s.NextUse({big, 4}).after == kNever);
  CHECK(s.NextUse({s.Id("f0"), 0}).next == 0);    // the stream's next read
  p.OnRead(big, 3 * Store::kChunk, 4096, false);  // the reader is in chunk 3
  CHECK(s.NextUse({big, 0}).next == kNever);      // passed
  CHECK(s.NextUse({big, 1}).next == kNever);
  CHECK(s.NextUse({big, 2}).next == 0);  // read-ahead may still be fetching it
  CHECK(s.NextUse({big, 4}).next == 0);
  // A reader that went quiet: after a second, the order alone speaks.
  CHECK(testing::Eventually([&] { return s.NextUse({big, 4}).next == kNever; }));
}

}  // namespace
}  // namespace tierfs
