// Placement policies: first-fit and lru, over RAM tiers used only for their
// budgets.
#include "tiering/placement.h"

#include <catch2/catch.hpp>
#include <map>
#include <thread>

namespace tierfs {
namespace {

ChunkKey K(uint32_t n) { return ChunkKey{n, 0}; }

// Owns the tiers and plays the evictor: records each eviction and releases
// the evicted chunk's bytes, as Promoter::Evict does.
class Tiers {
 public:
  explicit Tiers(std::vector<uint64_t> budgets) {
    for (size_t i = 0; i < budgets.size(); ++i) {
      owned_.push_back(NewMemoryTier("t" + std::to_string(i), budgets[i]));
      tiers_.push_back(owned_.back().get());
    }
  }
  const std::vector<Tier*>& all() const { return tiers_; }
  Tier& operator[](size_t i) { return *tiers_[i]; }

  // Places `key` and, if placed, records it as resident and tells the policy.
  int PlaceAndPublish(PlacementPolicy& policy, ChunkKey key, uint64_t bytes) {
    int tier = policy.Place(key, bytes);
    if (tier >= 0) {
      resident_[key.node] = {tier, bytes};
      policy.Published(key, tier);
    }
    return tier;
  }
  Evictor evictor() {
    return [this](ChunkKey key, int tier) -> uint64_t {
      victims_.push_back(key.node);
      auto it = resident_.find(key.node);
      if (it == resident_.end() || it->second.first != tier) return 0;
      uint64_t bytes = it->second.second;
      resident_.erase(it);
      tiers_[static_cast<size_t>(tier)]->Release(bytes);
      return bytes;
    };
  }
  const std::vector<NodeId>& victims() const { return victims_; }

 private:
  std::vector<std::unique_ptr<Tier>> owned_;
  std::vector<Tier*> tiers_;
  std::map<NodeId, std::pair<int, uint64_t>> resident_;  // node -> (tier, bytes)
  std::vector<NodeId> victims_;
};

TEST_CASE("first-fit picks the fastest tier with room, then the next", "[placement]") {
  Tiers tiers({100, 1000});
  auto policy = NewPlacementPolicy("first-fit", tiers.all(), nullptr);
  REQUIRE(policy != nullptr);
  CHECK(std::string(policy->name()) == "first-fit");
  CHECK(policy->Place(K(1), 60) == 0);
  CHECK(policy->Place(K(2), 60) == 1);  // 40 left in tier 0
  CHECK(policy->Place(K(3), 40) == 0);  // exactly fills tier 0
  CHECK(policy->Place(K(4), 1) == 1);
  CHECK(tiers[0].used() == 100);
  CHECK(tiers[1].used() == 61);
  CHECK(policy->Place(K(5), 940) == -1);  // 939 left in tier 1
  CHECK(policy->Place(K(6), 939) == 1);
  CHECK(policy->Place(K(7), 1) == -1);
  CHECK(tiers[0].used() == 100);
  CHECK(tiers[1].used() == 1000);
  CHECK(policy->evictions() == 0);
}

TEST_CASE("first-fit still places small chunks after one that fits nowhere", "[placement]") {
  // Monarch stopped placing anything once one file did not fit; here a chunk
  // bigger than every tier gets -1 and smaller ones are still placed.
  Tiers tiers({100, 200});
  auto policy = NewFirstFitPolicy(tiers.all());
  CHECK(policy->Place(K(1), 90) == 0);
  CHECK(policy->Place(K(2), 5000) == -1);
  CHECK(policy->Place(K(3), 201) == -1);
  CHECK(policy->Place(K(4), 10) == 0);
  CHECK(policy->Place(K(5), 200) == 1);
  CHECK(policy->Place(K(6), 5000) == -1);
  CHECK(policy->Place(K(7), 1) == -1);
  tiers[1].Release(200);
  CHECK(policy->Place(K(8), 150) == 1);
  CHECK(tiers[0].used() == 100);
  CHECK(tiers[1].used() == 150);
}

TEST_CASE("first-fit never exceeds a budget under 8 placing threads", "[placement]") {
  Tiers tiers({10000, 30000});
  auto policy = NewFirstFitPolicy(tiers.all());
  std::atomic<uint64_t> placed[2] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t i = 0; i < 2000; ++i) {
        uint64_t bytes = 1 + (i * 13 + static_cast<uint32_t>(t) * 7) % 97;
        int tier = policy->Place(K(i), bytes);
        if (tier >= 0) placed[tier].fetch_add(bytes);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < 2; ++i) {
    CHECK(tiers[i].used() == placed[i].load());
    CHECK(tiers[i].used() <= tiers[i].budget());
  }
  CHECK(tiers[0].used() > 10000 - 97);  // filled as far as pieces go
  CHECK(tiers[1].used() > 30000 - 97);
}

TEST_CASE("first-fit respects a tier marked full", "[placement]") {
  Tiers tiers({100, 100});
  auto policy = NewFirstFitPolicy(tiers.all());
  CHECK(policy->Place(K(1), 10) == 0);
  tiers[0].MarkFull();
  CHECK(policy->Place(K(2), 10) == 1);
}

TEST_CASE("lru evicts the least recently touched chunks first", "[placement]") {
  Tiers tiers({100});
  auto policy = NewPlacementPolicy("lru", tiers.all(), tiers.evictor());
  REQUIRE(policy != nullptr);
  CHECK(std::string(policy->name()) == "lru");
  for (uint32_t n = 1; n <= 4; ++n) CHECK(tiers.PlaceAndPublish(*policy, K(n), 25) == 0);
  // Published 1, 2, 3, 4; then read 2, 1, 4: least recent first is 3, 2, 1, 4.
  policy->Touched(K(2));
  policy->Touched(K(1));
  policy->Touched(K(4));
  policy->Touched(K(99));  // not resident: ignored
  CHECK(tiers.victims().empty());
  CHECK(tiers.PlaceAndPublish(*policy, K(5), 50) == 0);  // needs two chunks' room
  CHECK(tiers.victims() == std::vector<NodeId>{3, 2});
  // Now 5 (newest), 4, 1: least recent first is 1, 4, 5.
  CHECK(tiers.PlaceAndPublish(*policy, K(6), 30) == 0);
  CHECK(tiers.victims() == std::vector<NodeId>{3, 2, 1, 4});
  CHECK(policy->evictions() == 4);
  CHECK(tiers[0].used() == 80);
  CHECK(tiers[0].used() <= tiers[0].budget());
}

TEST_CASE("lru does not evict while some tier has room", "[placement]") {
  Tiers tiers({100, 100});
  auto policy = NewLruPolicy(tiers.all(), tiers.evictor());
  CHECK(tiers.PlaceAndPublish(*policy, K(1), 60) == 0);
  CHECK(tiers.PlaceAndPublish(*policy, K(2), 60) == 1);  // tier 0 is too full: next tier
  CHECK(tiers.PlaceAndPublish(*policy, K(3), 40) == 0);
  CHECK(tiers.PlaceAndPublish(*policy, K(4), 40) == 1);
  CHECK(tiers.victims().empty());
  CHECK(policy->evictions() == 0);
  // Both full now: the fastest tier makes room.
  CHECK(tiers.PlaceAndPublish(*policy, K(5), 50) == 0);
  CHECK(tiers.victims() == std::vector<NodeId>{1});
}

TEST_CASE("lru does not evict from a tier the chunk could never fit", "[placement]") {
  Tiers tiers({100, 1000});
  auto policy = NewLruPolicy(tiers.all(), tiers.evictor());
  CHECK(tiers.PlaceAndPublish(*policy, K(1), 100) == 0);
  CHECK(tiers.PlaceAndPublish(*policy, K(2), 600) == 1);
  CHECK(tiers.PlaceAndPublish(*policy, K(3), 400) == 1);
  CHECK(tiers.PlaceAndPublish(*policy, K(4), 200) == 1);  // too big for tier 0
  CHECK(tiers.victims() == std::vector<NodeId>{2});
  CHECK(tiers[0].used() == 100);
  CHECK(policy->Place(K(5), 1001) == -1);  // bigger than every tier
  CHECK(tiers.victims() == std::vector<NodeId>{2});
  CHECK(tiers[0].used() == 100);
  CHECK(tiers[1].used() == 600);
}

TEST_CASE("NewPlacementPolicy rejects an unknown name", "[placement]") {
  Tiers tiers({100});
  CHECK(NewPlacementPolicy("mru", tiers.all(), nullptr) == nullptr);
  CHECK(PlacementPolicyNames() == std::vector<std::string>{"first-fit", "lru"});
}

}  // namespace
}  // namespace tierfs
