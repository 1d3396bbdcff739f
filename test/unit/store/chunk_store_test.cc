// ChunkStore: placement (fastest tier with room), eviction through the
// production policies, the claim's RAII undo, and chunks lost in a tier.
#include "tiering/store/chunk_store.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>

#include "recording_policy.h"
#include "scan_tree.h"

namespace tierfs {
namespace {

using namespace std::chrono_literals;

using testing::RecordingPolicy;
using testing::TempTree;

// SOURCE holds files f0..fN of the given sizes (one chunk each); RAM tiers
// of the given budgets; a ChunkStore with the named policy.
class Store {
 public:
  Store(const std::vector<uint64_t>& sizes, const std::vector<uint64_t>& budgets,
        const std::string& policy = "first-fit") {
    for (size_t i = 0; i < sizes.size(); ++i)
      tree_.Write(fmt::format("f{}", i), Bytes(i, sizes[i]));
    ns_ = testing::ScanTree(tree_);
    std::vector<std::unique_ptr<Tier>> tiers;
    for (size_t i = 0; i < budgets.size(); ++i) {
      tiers.push_back(NewMemoryTier(fmt::format("t{}", i), budgets[i]));
    }
    auto catalog = std::make_unique<Catalog>(*ns_, 1 << 20);
    auto inner = NewEvictionPolicy(policy, static_cast<int>(budgets.size()), catalog.get());
    REQUIRE(inner != nullptr);
    auto recording = std::make_unique<RecordingPolicy>(std::move(inner));
    policy_ = recording.get();
    store_ = std::make_unique<ChunkStore>(ns_.get(), std::move(catalog), std::move(tiers),
                                          std::move(recording));
  }
  static std::string Bytes(size_t i, uint64_t n) {
    return std::string(n, static_cast<char>('a' + i % 26));
  }
  ChunkKey K(size_t i) const { return ChunkKey{*ns_->Resolve(fmt::format("f{}", i)), 0}; }
  size_t FileOf(NodeId id) const { return std::stoul(std::string(ns_->name(id)).substr(1)); }
  std::vector<size_t> Victims() const {
    std::vector<size_t> out;
    for (NodeId id : policy_->victims) out.push_back(FileOf(id));
    return out;
  }

  // Claims, copies and publishes file i; the tier it went to, or -1.
  int Promote(size_t i, ClaimOwner whose = ClaimOwner::kOwn) {
    ChunkClaim claim;
    if (store_->Claim(K(i), &claim, whose) != ChunkStore::ClaimResult::kClaimed) return -1;
    std::string data = Bytes(i, claim.length());
    REQUIRE(claim.Write(data.data(), data.size()) == 0);
    REQUIRE(claim.Publish() == 0);
    return claim.tier();
  }
  // Reads file i from its tier (a hit tells the policy).
  bool Hit(size_t i) {
    uint8_t state = store_->state(K(i));
    if (!Catalog::IsResident(state)) return false;
    std::vector<char> scratch(16);
    TierRead out;
    return store_->Read(K(i), state, 0, 1, scratch.data(), &out) == 0;
  }
  ChunkStore& operator*() { return *store_; }
  ChunkStore* operator->() { return store_.get(); }
  Tier& tier(size_t i) { return *store_->tiers()[i]; }
  RecordingPolicy& policy() { return *policy_; }

 private:
  TempTree tree_;
  std::unique_ptr<Namespace> ns_;
  RecordingPolicy* policy_;
  std::unique_ptr<ChunkStore> store_;
};

TEST_CASE("ChunkStore places in the fastest tier with room, then the next", "[chunk_store]") {
  Store s({60, 60, 40, 1, 940, 939, 1}, {100, 1000});
  CHECK(std::string(s->policy().name()) == "next-use");
  CHECK(s.Promote(0) == 0);
  CHECK(s.Promote(1) == 1);  // 40 left in tier 0
  CHECK(s.Promote(2) == 0);  // exactly fills tier 0
  CHECK(s.Promote(3) == 1);
  CHECK(s.tier(0).used() == 100);
  CHECK(s.tier(1).used() == 61);
  CHECK(s.Promote(4) == -1);  // 939 left in tier 1
  CHECK(s.Promote(5) == 1);
  CHECK(s->counters().no_room == 1);
  CHECK(s.tier(1).used() == 1000);
  CHECK(s->counters().evicted == 0);  // no declared order: first-fit never evicts
  CHECK(s->counters().done == 5);
}

TEST_CASE("ChunkStore still places small chunks after one that fits nowhere", "[chunk_store]") {
  // Monarch stopped placing anything once one file did not fit.
  Store s({90, 5000, 201, 10, 200, 1}, {100, 200});
  CHECK(s.Promote(0) == 0);
  CHECK(s.Promote(1) == -1);
  CHECK(s.Promote(2) == -1);
  CHECK(s.Promote(3) == 0);
  CHECK(s.Promote(4) == 1);
  CHECK(s.Promote(5) == -1);
  CHECK(s->state(s.K(1)) == Catalog::kOnSource);  // a refused claim leaves nothing in flight
}

TEST_CASE("ChunkStore never exceeds a budget under 8 claiming threads", "[chunk_store]") {
  std::vector<uint64_t> sizes;
  for (uint32_t i = 0; i < 800; ++i) sizes.push_back(1 + (i * 13) % 97);
  Store s(sizes, {10000, 20000});
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < sizes.size(); i += 4) {  // two claimers per file
        ChunkClaim claim;
        if (s->Claim(s.K(i), &claim) != ChunkStore::ClaimResult::kClaimed) continue;
        std::string data = Store::Bytes(i, claim.length());
        if (claim.Write(data.data(), data.size()) == 0 && i % 3 != 0) claim.Publish();
        // every third is dropped unpublished: the claim undoes itself
      }
    });
  }
  for (auto& t : threads) t.join();
  uint64_t resident[2] = {0, 0};
  for (size_t i = 0; i < sizes.size(); ++i) {
    uint8_t state = s->state(s.K(i));
    CHECK(state != Catalog::kInFlight);
    if (Catalog::IsResident(state)) resident[Catalog::TierOf(state)] += sizes[i];
    if (i % 3 == 0) CHECK(state == Catalog::kOnSource);
  }
  for (size_t t = 0; t < 2; ++t) {
    CHECK(s.tier(t).used() == resident[t]);
    CHECK(s.tier(t).used() <= s.tier(t).budget());
  }
}

TEST_CASE("ChunkStore respects a tier marked full", "[chunk_store]") {
  Store s({10, 10}, {100, 100});
  CHECK(s.Promote(0) == 0);
  s.tier(0).MarkFull();
  CHECK(s.Promote(1) == 1);
}

TEST_CASE("A claim undoes itself on every exit that did not publish", "[chunk_store]") {
  Store s({50, 50}, {100});
  SECTION("destroyed") {
    {
      ChunkClaim claim;
      REQUIRE(s->Claim(s.K(0), &claim) == ChunkStore::ClaimResult::kClaimed);
      CHECK(s->state(s.K(0)) == Catalog::kInFlight);
      CHECK(s.tier(0).used() == 50);
      CHECK(claim.Write("xyz", 3) == 0);
    }
    CHECK(s->counters().failed == 0);  // dropped unrun is not a failure
  }
  SECTION("an exception") {
    try {
      ChunkClaim claim;
      REQUIRE(s->Claim(s.K(0), &claim) == ChunkStore::ClaimResult::kClaimed);
      throw std::bad_alloc();
    } catch (const std::bad_alloc&) {
    }
  }
  SECTION("moved over") {
    ChunkClaim claim;
    REQUIRE(s->Claim(s.K(0), &claim) == ChunkStore::ClaimResult::kClaimed);
    ChunkClaim other;
    REQUIRE(s->Claim(s.K(1), &other) == ChunkStore::ClaimResult::kClaimed);
    claim = std::move(other);  // f0's claim is undone, f1's lives on in `claim`
    CHECK(s->state(s.K(0)) == Catalog::kOnSource);
    CHECK(s->state(s.K(1)) == Catalog::kInFlight);
    std::string data = Store::Bytes(1, 50);
    REQUIRE(claim.Write(data.data(), 50) == 0);
    REQUIRE(claim.Publish() == 0);
    CHECK(s->state(s.K(1)) == Catalog::kResidentBase);
    CHECK(s.tier(0).used() == 50);
    return;
  }
  SECTION("a short copy") {
    ChunkClaim claim;
    REQUIRE(s->Claim(s.K(0), &claim) == ChunkStore::ClaimResult::kClaimed);
    REQUIRE(claim.Write("xyz", 3) == 0);
    CHECK(claim.Write(std::string(48, 'x').data(), 48) == -EOVERFLOW);  // more than reserved
    CHECK(claim.Publish() == -EIO);
    CHECK(s->counters().failed == 1);
  }
  SECTION("ENOSPC marks the tier full") {
    ChunkClaim claim;
    REQUIRE(s->Claim(s.K(0), &claim) == ChunkStore::ClaimResult::kClaimed);
    claim.Fail(-ENOSPC, "test");
    CHECK(s.tier(0).limit() == 0);
    CHECK(s->counters().failed == 1);
    CHECK(s.Promote(1) == -1);
  }
  CHECK(s->state(s.K(0)) == Catalog::kOnSource);
  CHECK(s.tier(0).used() == 0);
  CHECK(s.tier(0).chunks() == 0);
  ChunkClaim again;
  CHECK(s->Claim(s.K(0), &again) != ChunkStore::ClaimResult::kBusy);  // not left in flight
}

TEST_CASE("A reader that sees a chunk in flight finds its entry from the first moment",
          "[chunk_store]") {
  // The reader starts while the claim is being placed (the catalog says "in
  // flight" already) and must be served the first bytes as they are
  // written. Were the entry listed only after the placement, the reader
  // would find none and be sent back to the catalog without the bytes.
  Store s({64}, {100});
  const std::string data = Store::Bytes(0, 64);
  std::future<int> reader;
  TierRead early;
  s.policy().on_admitted = [&](ChunkKey key) {
    REQUIRE(s->state(key) == Catalog::kInFlight);
    reader = std::async(std::launch::async, [&, key] {
      return s->ReadInFlight(key, 0, 8, std::chrono::steady_clock::now() + 10s, &early);
    });
    // Give the reader time to look while this claim is still being placed.
    std::this_thread::sleep_for(100ms);
  };
  ChunkClaim claim;
  REQUIRE(s->Claim(s.K(0), &claim) == ChunkStore::ClaimResult::kClaimed);
  s.policy().on_admitted = nullptr;
  REQUIRE(reader.valid());
  REQUIRE(claim.Write(data.data(), 16) == 0);
  REQUIRE(reader.wait_for(5s) == std::future_status::ready);
  REQUIRE(reader.get() == 0);
  REQUIRE(early.size == 8);
  CHECK(std::string(early.data, 8) == data.substr(0, 8));
  REQUIRE(claim.Write(data.data() + 16, 48) == 0);
  REQUIRE(claim.Publish() == 0);
  // Once published, a late reader is sent back to the catalog at once.
  TierRead late;
  CHECK(s->ReadInFlight(s.K(0), 0, 8, std::chrono::steady_clock::now() + 10s, &late) == -EAGAIN);
}

TEST_CASE("lru evicts the least recently read chunks first", "[chunk_store]") {
  Store s({25, 25, 25, 25, 50, 30}, {100}, "lru");
  CHECK(std::string(s->policy().name()) == "lru");
  for (size_t i = 0; i < 4; ++i) CHECK(s.Promote(i) == 0);
  // Published 0, 1, 2, 3; then read 1, 0, 3: least recent first is 2, 1, 0, 3.
  CHECK(s.Hit(1));
  CHECK(s.Hit(0));
  CHECK(s.Hit(3));
  CHECK(s.Victims().empty());
  CHECK(s.Promote(4) == 0);  // needs two chunks' room
  CHECK(s.Victims() == std::vector<size_t>{2, 1});
  // Now 4 (newest), 3, 0: least recent first is 0, 3, 4.
  CHECK(s.Promote(5) == 0);
  CHECK(s.Victims() == std::vector<size_t>{2, 1, 0, 3});
  CHECK(s->counters().evicted == 4);
  CHECK(s.tier(0).used() == 80);
  CHECK(s->state(s.K(2)) == Catalog::kOnSource);
  CHECK(s->policy().entries() == 2);  // what it keeps is what is resident: 4 and 5
}

TEST_CASE("lru does not evict while some tier has room", "[chunk_store]") {
  Store s({60, 60, 40, 40, 50}, {100, 100}, "lru");
  CHECK(s.Promote(0) == 0);
  CHECK(s.Promote(1) == 1);  // tier 0 is too full: next tier
  CHECK(s.Promote(2) == 0);
  CHECK(s.Promote(3) == 1);
  CHECK(s.Victims().empty());
  CHECK(s.Promote(4) == 0);  // both full now: the fastest tier makes room
  CHECK(s.Victims() == std::vector<size_t>{0});
}

TEST_CASE("lru does not evict from a tier the chunk could never fit", "[chunk_store]") {
  Store s({100, 600, 400, 200, 1001}, {100, 1000}, "lru");
  CHECK(s.Promote(0) == 0);
  CHECK(s.Promote(1) == 1);
  CHECK(s.Promote(2) == 1);
  CHECK(s.Promote(3) == 1);  // too big for tier 0
  CHECK(s.Victims() == std::vector<size_t>{1});
  CHECK(s.Promote(4) == -1);  // bigger than every tier
  CHECK(s.Victims() == std::vector<size_t>{1});
  CHECK(s.tier(0).used() == 100);
  CHECK(s.tier(1).used() == 600);
}

TEST_CASE("Copies of peers' chunks take free room only and go first for own chunks",
          "[chunk_store][peer]") {
  for (const char* policy : {"first-fit", "lru"}) {
    INFO(policy);
    Store s({40, 40, 40, 40, 40, 40}, {100}, policy);
    CHECK(s.Promote(0, ClaimOwner::kPeerCopy) == 0);
    CHECK(s.Promote(1, ClaimOwner::kPeerCopy) == 0);
    CHECK(s.Promote(2, ClaimOwner::kPeerCopy) ==
          -1);  // 20 left: a copy evicts nothing, even under lru
    CHECK(s->counters().evicted == 0);
    // This node's own chunk: a copy makes room, whatever the policy would say
    // (first-fit with no order never evicts).
    CHECK(s.Promote(3) == 0);
    CHECK(s->counters().copies_evicted == 1);
    CHECK(s.Promote(4) == 0);
    CHECK(s->counters().copies_evicted == 2);
    CHECK(s.tier(0).used() == 80);
    CHECK_FALSE(Catalog::IsResident(s->state(s.K(0))));
    CHECK_FALSE(Catalog::IsResident(s->state(s.K(1))));
    CHECK(s.Hit(3));
    CHECK(s.Hit(4));
    // No copy left: the own chunk gets only what the policy gives.
    int placed = s.Promote(5);
    if (std::string(policy) == "first-fit")
      CHECK(placed == -1);
    else
      CHECK(placed == 0);  // lru evicts an own chunk
    CHECK(s->counters().copies_evicted == 2);
  }
}

TEST_CASE("NewEvictionPolicy rejects an unknown name", "[chunk_store]") {
  CHECK(NewEvictionPolicy("mru", 1, nullptr) == nullptr);
  CHECK(EvictionPolicyNames() == std::vector<std::string>{"next-use", "lru"});
  // The earlier name of next-use is still accepted (fstab lines, job scripts).
  CHECK(CanonicalPolicyName("first-fit") == "next-use");
  CHECK(std::string(NewEvictionPolicy("first-fit", 1, nullptr)->name()) == "next-use");
  CHECK(CanonicalPolicyName("random").empty());
  CHECK(NewEvictionPolicy("random", 1, nullptr) == nullptr);
}

}  // namespace
}  // namespace tierfs
