// The reclaimer: a claim with its tier short of room evicts nothing on its
// own thread; it reserves from the free room the tier keeps, or answers
// "no room" and kicks the reclaimer, whose job (run here by hand, as navy's
// tests step a mock job scheduler) evicts in the policy's order until the
// tier has its high watermark free.
#include "tiering/store/reclaimer.h"

#include <fmt/format.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <deque>
#include <thread>
#include <vector>

#include "recording_policy.h"
#include "scan_tree.h"
#include "tiering/store/chunk_store.h"

namespace tierfs {
namespace {

using testing::RecordingPolicy;
using testing::TempTree;

constexpr uint64_t kMiB = 1 << 20;

// Queues jobs; the test runs them.
class SteppedJobs final : public JobRunner {
 public:
  bool Run(std::function<void()> job) override {
    if (refuse) return false;
    jobs.push_back(std::move(job));
    return true;
  }
  void RunAll() {
    while (!jobs.empty()) {
      auto job = std::move(jobs.front());
      jobs.pop_front();
      job();
    }
  }
  std::deque<std::function<void()>> jobs;
  bool refuse = false;
};

// `files` files of one 1 MiB chunk each; one RAM tier of `tier_mib` MiB;
// LRU, or the next-use policy with the uses the test declares (Uses);
// evictions on `jobs`.
class Fixture {
 public:
  Fixture(size_t files, uint64_t tier_mib, JobRunner* jobs, bool next_use = false) {
    for (size_t i = 0; i < files; ++i) tree_.Write(fmt::format("f{}", i), std::string(kMiB, 'x'));
    ns_ = testing::ScanTree(tree_);
    std::vector<std::unique_ptr<Tier>> tiers;
    tiers.push_back(NewMemoryTier("ram", tier_mib * kMiB));
    auto catalog = std::make_unique<Catalog>(*ns_, kMiB);
    auto next_uses = std::make_unique<NextUseTable>(ns_->size());
    next_uses_ = next_uses.get();
    next_uses_->SetActive(true);
    std::unique_ptr<EvictionPolicy> inner = NewLruPolicy(1);
    if (next_use) {
      auto belady = NewBeladyPolicy(1, catalog.get(), next_uses_);
      belady_ = belady.get();
      inner = std::move(belady);
    }
    auto recording = std::make_unique<RecordingPolicy>(std::move(inner));
    policy = recording.get();
    store = std::make_unique<ChunkStore>(ns_.get(), std::move(catalog), std::move(tiers),
                                         std::move(recording), std::move(next_uses), jobs);
  }
  // File i is read next at position `next` of the one declared order (kNever: no use
  // left), as the planner writes it; the next-use policy hears.
  void Uses(size_t i, uint64_t next) {
    next_uses_->Set(K(i).node, {{next, 0}, {NextUseTable::kNever, 0}, next});
    if (belady_ != nullptr) belady_->NextUseChanged(K(i).node);
  }
  // Promotes file i on a thread of its own marked as the planner's.
  bool PromoteAhead(size_t i) {
    bool promoted = false;
    std::thread planner([&] {
      const BackgroundClaims background;
      promoted = Promote(i);
    });
    planner.join();
    return promoted;
  }
  bool Resident(size_t i) const { return Catalog::IsResident(store->state(K(i))); }
  ChunkKey K(size_t i) const { return ChunkKey{*ns_->Resolve(fmt::format("f{}", i)), 0}; }
  // Claims, fills and publishes file i: true if it was claimed.
  bool Promote(size_t i) {
    ChunkClaim claim;
    if (store->Claim(K(i), &claim) != ChunkStore::ClaimResult::kClaimed) return false;
    std::string data(claim.length(), 'x');
    REQUIRE(claim.Write(data.data(), data.size()) == 0);
    REQUIRE(claim.Publish() == 0);
    return true;
  }
  Tier& tier() { return *store->tiers()[0]; }
  std::vector<size_t> Victims() const {
    std::vector<size_t> out;
    for (NodeId id : policy->victims)
      out.push_back(std::stoul(std::string(ns_->name(id)).substr(1)));
    return out;
  }

  RecordingPolicy* policy = nullptr;
  std::unique_ptr<ChunkStore> store;

 private:
  TempTree tree_;
  std::unique_ptr<Namespace> ns_;
  NextUseTable* next_uses_ = nullptr;  // store's
  BeladyPolicy* belady_ = nullptr;     // store's, under `policy`; null for LRU
};

TEST_CASE("Watermarks: two chunks or 1/64 of the tier, at most 1/8, none inline", "[reclaimer]") {
  CHECK(Watermarks::For(8 * kMiB, kMiB, false).high == kMiB);  // 1/8 of a small tier
  CHECK(Watermarks::For(8 * kMiB, kMiB, false).low == kMiB / 2);
  CHECK(Watermarks::For(64 * kMiB, kMiB, false).high == 2 * kMiB);     // two chunks
  CHECK(Watermarks::For(1024 * kMiB, kMiB, false).high == 16 * kMiB);  // 1/64
  CHECK(Watermarks::For(1024 * kMiB, kMiB, true).high == 0);
}

TEST_CASE("A claim in a full tier evicts nothing on its thread: the reclaimer does",
          "[reclaimer]") {
  SteppedJobs jobs;
  Fixture s(12, 8, &jobs);                               // high watermark 1 MiB free, low 512 KiB
  for (size_t i = 0; i < 7; ++i) REQUIRE(s.Promote(i));  // room to spare: no question, no job
  CHECK(jobs.jobs.empty());
  CHECK(s.Promote(7));  // the last MiB, below the low watermark: taken, the reclaimer kicked
  CHECK(jobs.jobs.size() == 1);
  CHECK(s.Victims().empty());
  CHECK_FALSE(s.Promote(8));  // no room yet: refused, its victim named, nothing evicted here
  CHECK(s.Victims() == std::vector<size_t>{0});
  CHECK(s.store->counters().evicted == 0);
  CHECK(s.store->counters().behind == 1);
  CHECK(s.tier().used() == 8 * kMiB);
  CHECK(jobs.jobs.size() == 1);  // one job per tier, however often kicked
  jobs.RunAll();
  CHECK(s.Victims() == std::vector<size_t>{0});  // the one named, and 1 MiB is free
  CHECK(s.tier().used() == 7 * kMiB);
  CHECK(s.store->counters().evicted == 1);
  CHECK(s.Promote(8));
  jobs.RunAll();
  CHECK(s.Victims() == std::vector<size_t>{0, 1});
}

TEST_CASE("A reader's claim in a full tier waits for the room the reclaimer frees for it",
          "[reclaimer]") {
  SteppedJobs jobs;
  Fixture s(12, 8, &jobs);
  s.store->set_room_wait(std::chrono::seconds(10));      // no timing in the test: it waits
  for (size_t i = 0; i < 8; ++i) REQUIRE(s.Promote(i));  // full, the reclaimer's job held
  REQUIRE(jobs.jobs.size() == 1);
  // The reclaimer's job runs on another thread once the reader's claim is
  // under way (its chunk in flight) and has had time to find no room.
  std::atomic<bool> returned{false};
  std::thread pool([&] {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!returned && s.store->state(s.K(8)) != Catalog::kInFlight &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    jobs.RunAll();
  });
  // It names its victim and waits for the room, rather than answering "no
  // room" at once and leaving the reader to read SOURCE uncached.
  const bool promoted = s.Promote(8);
  returned = true;
  pool.join();
  CHECK(promoted);
  CHECK(s.Resident(8));
  CHECK(s.store->counters().behind == 0);
  CHECK(s.Victims().front() == 0);  // LRU's tail made the room
}

TEST_CASE("A reader's claim waits for the reclaimer a bounded time, then answers no room",
          "[reclaimer]") {
  SteppedJobs jobs;  // the reclaimer's job never runs by itself
  Fixture s(12, 8, &jobs);
  for (size_t i = 0; i < 8; ++i) REQUIRE(s.Promote(i));
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(s.Promote(8));
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= ChunkStore::kRoomWait);
  CHECK(waited < std::chrono::seconds(5));  // bounded (kRoomWait, and a loaded host's slack)
  CHECK(s.store->counters().behind == 1);
}

TEST_CASE("A refused job leaves the next kick to try again", "[reclaimer]") {
  SteppedJobs jobs;
  Fixture s(12, 8, &jobs);
  for (size_t i = 0; i < 7; ++i) REQUIRE(s.Promote(i));
  jobs.refuse = true;   // the pool's queue is full
  CHECK(s.Promote(7));  // the room left is taken; the kick is refused
  CHECK(jobs.jobs.empty());
  CHECK(s.store->counters().evicted == 0);
  jobs.refuse = false;
  CHECK_FALSE(s.Promote(8));  // kicks again: queued this time
  REQUIRE(jobs.jobs.size() == 1);
  jobs.RunAll();
  CHECK(s.Promote(8));
}

TEST_CASE(
    "On a background thread, an admitted claim evicts for itself when the reclaimer is behind",
    "[reclaimer]") {
  SteppedJobs jobs;
  Fixture s(12, 8, &jobs);
  for (size_t i = 0; i < 8; ++i) REQUIRE(s.Promote(i));  // full; the reclaimer kicked, not run
  CHECK_FALSE(s.Promote(8));                             // a reader's thread: no room
  CHECK(s.store->counters().evicted == 0);
  bool promoted = false;
  std::thread planner([&] {
    const BackgroundClaims background;
    promoted = s.Promote(8);
  });
  planner.join();
  CHECK(promoted);
  CHECK(s.Victims() == std::vector<size_t>{0});  // just enough for the claim, LRU's tail
  CHECK(s.tier().used() == 8 * kMiB);
  CHECK_FALSE(BackgroundClaims::here());  // the mark was the planner thread's only
}

// A tier of two chunks filled by the look-ahead of one declared order, as on
// a node of test_peers' look-ahead test: every chunk with a use still to come
// stays until it is read, whoever evicts and whenever the reclaimer runs.
TEST_CASE("Next-use: the reclaimer evicts no chunk needed before one it keeps",
          "[reclaimer][belady]") {
  SteppedJobs jobs;
  Fixture s(4, 2, &jobs, true);  // high watermark 256 KiB free, low 128 KiB
  for (size_t i = 0; i < 4; ++i) s.Uses(i, i);
  CHECK(s.PromoteAhead(0));
  CHECK(s.PromoteAhead(1));         // below the low watermark: free room, no eviction
  s.Uses(0, NextUseTable::kNever);  // f0 read
  SECTION("the planner's claim evicted for itself: the reclaimer evicts nothing more") {
    CHECK(s.PromoteAhead(2));  // f2 in f0's place, f0 evicted on the planner's thread
    CHECK(s.Victims() == std::vector<size_t>{0});
    jobs.RunAll();  // the job its claim kicked: f1 (needed before f2) stays
    CHECK(s.Victims() == std::vector<size_t>{0});
    CHECK(s.Resident(1));
    CHECK(s.Resident(2));
  }
  SECTION("a reader's claim names its victim; the reclaimer evicts that one only") {
    CHECK_FALSE(s.Promote(2));       // a reader's thread: no room, f0 named for f2
    CHECK_FALSE(s.PromoteAhead(3));  // f0 already goes: nothing more is evicted for f3
    jobs.RunAll();
    CHECK(s.Victims() == std::vector<size_t>{0});
    CHECK(s.PromoteAhead(3));  // the free room f0 left
    CHECK(s.Resident(1));      // needed before f3
  }
  CHECK(s.tier().used() <= 2 * kMiB);
}

TEST_CASE("InlineJobs evicts on the claimer's thread, just enough for the claim", "[reclaimer]") {
  Fixture s(12, 8, InlineJobs::Get());
  for (size_t i = 0; i < 8; ++i) REQUIRE(s.Promote(i));
  CHECK(s.Victims().empty());  // every MiB of the tier used: nothing kept free
  CHECK(s.Promote(8));
  CHECK(s.Victims() == std::vector<size_t>{0});
  CHECK(s.tier().used() == 8 * kMiB);
}

}  // namespace
}  // namespace tierfs
