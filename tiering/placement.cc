#include "tiering/placement.h"

#include <list>
#include <mutex>
#include <unordered_map>

namespace tierfs {
namespace {

int FirstFit(const std::vector<Tier*>& tiers, uint64_t bytes) {
  for (size_t i = 0; i < tiers.size(); ++i) {
    if (tiers[i]->Reserve(bytes)) return static_cast<int>(i);
  }
  return -1;
}

class FirstFitPolicy final : public PlacementPolicy {
 public:
  explicit FirstFitPolicy(std::vector<Tier*> tiers) : tiers_(std::move(tiers)) {}
  const char* name() const override { return "first-fit"; }
  int Place(ChunkKey, uint64_t bytes) override { return FirstFit(tiers_, bytes); }

 private:
  const std::vector<Tier*> tiers_;
};

class LruPolicy final : public PlacementPolicy {
 public:
  LruPolicy(std::vector<Tier*> tiers, Evictor evict)
      : tiers_(std::move(tiers)), evict_(std::move(evict)), lists_(tiers_.size()) {}
  const char* name() const override { return "lru"; }

  int Place(ChunkKey, uint64_t bytes) override {
    int tier = FirstFit(tiers_, bytes);
    if (tier >= 0) return tier;
    for (size_t i = 0; i < tiers_.size(); ++i) {
      if (bytes > tiers_[i]->limit()) continue;  // could never fit here
      while (true) {
        if (tiers_[i]->Reserve(bytes)) return static_cast<int>(i);
        ChunkKey victim;
        {
          std::lock_guard lock(mu_);
          if (lists_[i].order.empty()) break;
          victim = lists_[i].order.back();
          lists_[i].Erase(victim);
        }
        // Outside our lock: the evictor takes the tier's.
        if (evict_(victim, static_cast<int>(i)) > 0) evictions_.fetch_add(1);
      }
    }
    return -1;
  }

  void Published(ChunkKey key, int tier) override {
    std::lock_guard lock(mu_);
    lists_[static_cast<size_t>(tier)].PushFront(key);
  }

  void Touched(ChunkKey key) override {
    std::lock_guard lock(mu_);
    for (auto& list : lists_) {
      auto it = list.index.find(key);
      if (it == list.index.end()) continue;
      list.order.splice(list.order.begin(), list.order, it->second);
      return;
    }
  }

 private:
  struct List {
    std::list<ChunkKey> order;  // front = most recently used
    std::unordered_map<ChunkKey, std::list<ChunkKey>::iterator, ChunkKeyHash> index;
    void PushFront(ChunkKey k) {
      if (index.count(k)) return;
      order.push_front(k);
      index[k] = order.begin();
    }
    void Erase(ChunkKey k) {
      auto it = index.find(k);
      if (it == index.end()) return;
      order.erase(it->second);
      index.erase(it);
    }
  };
  const std::vector<Tier*> tiers_;
  const Evictor evict_;
  std::mutex mu_;  // guards lists_; never held while evicting (lock order: policy, then none)
  std::vector<List> lists_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> NewFirstFitPolicy(std::vector<Tier*> tiers) {
  return std::make_unique<FirstFitPolicy>(std::move(tiers));
}

std::unique_ptr<PlacementPolicy> NewLruPolicy(std::vector<Tier*> tiers, Evictor evict) {
  return std::make_unique<LruPolicy>(std::move(tiers), std::move(evict));
}

std::unique_ptr<PlacementPolicy> NewPlacementPolicy(const std::string& name,
                                                    std::vector<Tier*> tiers, Evictor evict) {
  if (name == "first-fit") return NewFirstFitPolicy(std::move(tiers));
  if (name == "lru") return NewLruPolicy(std::move(tiers), std::move(evict));
  return nullptr;
}

}  // namespace tierfs
