// Least recently used: a recency list per tier; the least recently read
// chunk of the full tier is the victim.
#include <list>
#include <unordered_map>

#include "tiering/base/mutex.h"
#include "tiering/store/eviction_policy.h"

namespace tierfs {
namespace {

class LruPolicy final : public EvictionPolicy {
 public:
  explicit LruPolicy(int tiers) : lists_(static_cast<size_t>(tiers)) {}
  const char* name() const override { return "lru"; }

  // Every chunk is worth a place: the least recently read one makes room.
  bool Admit(int, const Candidate&, Hold* hold) override {
    *hold = Hold::kKept;
    return true;
  }
  bool NextVictim(int tier, ChunkKey* victim) override {
    MutexLock lock(mu_);
    List& list = lists_[static_cast<size_t>(tier)];
    if (list.order.empty()) return false;
    *victim = list.order.back();
    list.Erase(*victim);
    return true;
  }
  void Admitted(ChunkKey, int, Hold) override {}
  void Published(ChunkKey key, int tier) override {
    MutexLock lock(mu_);
    lists_[static_cast<size_t>(tier)].PushFront(key);
  }
  void Abandoned(ChunkKey, int) override {}
  void Dropped(ChunkKey key, int tier) override {
    MutexLock lock(mu_);
    lists_[static_cast<size_t>(tier)].Erase(key);
  }
  void Touched(ChunkKey key) override {
    MutexLock lock(mu_);
    for (auto& list : lists_) {
      auto it = list.index.find(key);
      if (it == list.index.end()) continue;
      list.order.splice(list.order.begin(), list.order, it->second);
      return;
    }
  }

  size_t entries() const override {
    MutexLock lock(mu_);
    size_t n = 0;
    for (const auto& list : lists_) n += list.order.size();
    return n;
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
  mutable Mutex mu_;  // guards lists_. Lock order: a leaf (nothing is called while held).
  std::vector<List> lists_ GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<EvictionPolicy> NewLruPolicy(int tiers) {
  return std::make_unique<LruPolicy>(tiers);
}

}  // namespace tierfs
