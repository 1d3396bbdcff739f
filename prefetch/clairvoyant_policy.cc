#include "prefetch/clairvoyant_policy.h"

#include <deque>
#include <mutex>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "prefetch/order_plan.h"

namespace tierfs {
namespace {

class Clairvoyant final : public ClairvoyantPolicy {
 public:
  Clairvoyant(std::vector<Tier*> tiers, Evictor evict, const Catalog* catalog, NextUseFn next_use)
      : tiers_(std::move(tiers)),
        evict_(std::move(evict)),
        catalog_(catalog),
        next_use_(std::move(next_use)),
        per_tier_(tiers_.size()) {}

  const char* name() const override { return "first-fit"; }

  void SetTransientLimit(size_t chunks) override {
    std::lock_guard lock(mu_);
    transient_limit_ = std::max<size_t>(chunks, 1);
  }

  int Place(ChunkKey key, uint64_t bytes) override {
    for (size_t i = 0; i < tiers_.size(); ++i) {
      if (tiers_[i]->Reserve(bytes)) return Admit(key, i, false);
    }
    for (size_t i = 0; i < tiers_.size(); ++i) {
      if (bytes > tiers_[i]->limit()) continue;
      bool transient = false;
      while (true) {
        if (tiers_[i]->Reserve(bytes)) return Admit(key, i, transient);
        ChunkKey victim;
        {
          std::lock_guard lock(mu_);
          if (!ChooseVictim(i, key, bytes, &victim, &transient)) break;
        }
        if (evict_(victim, static_cast<int>(i)) > 0) evictions_.fetch_add(1);
      }
    }
    return -1;
  }

  void Published(ChunkKey key, int tier) override {
    std::lock_guard lock(mu_);
    TierState& t = per_tier_[static_cast<size_t>(tier)];
    auto it = placing_.find(key);
    bool transient = it != placing_.end() && it->second.transient;
    uint64_t for_use = transient ? it->second.for_use : 0;
    if (it != placing_.end()) placing_.erase(it);
    if (transient) {
      // A reader waiting for the chunk wakes at the catalog's Publish, before
      // this call, and may have consumed the use it was promoted for already.
      bool read = next_use_(key.node).next != for_use;
      t.transient[key] = read;
      if (read) t.recycle.push_back(key);
    } else {
      t.resident.insert(key);
      Track(t, {next_use_(key.node).next, key});
    }
  }

  size_t ordering_entries() const override {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (const auto& t : per_tier_) n += t.heap.size();
    return n;
  }

  void Abandoned(ChunkKey key, int tier) override {
    std::lock_guard lock(mu_);
    auto it = placing_.find(key);
    if (it == placing_.end()) return;
    if (it->second.transient) {
      per_tier_[static_cast<size_t>(tier)].transient_bytes -= catalog_->length(key.node, key.chunk);
    }
    placing_.erase(it);
  }

  void NextUseChanged(NodeId node) override {
    std::lock_guard lock(mu_);
    bool fetched = false;
    uint64_t use = 0;
    for (uint32_t c = 0; c < catalog_->chunks(node); ++c) {
      ChunkKey key{node, c};
      for (auto& t : per_tier_) {
        auto tr = t.transient.find(key);
        if (tr != t.transient.end()) {
          if (!tr->second) {  // its one read is done: first to go
            tr->second = true;
            t.recycle.push_back(key);
          }
          continue;
        }
        if (!t.resident.count(key)) continue;
        if (!fetched) {
          use = next_use_(node).next;
          fetched = true;
        }
        Track(t, {use, key});
      }
    }
  }

 private:
  struct Entry {
    uint64_t next_use;
    ChunkKey key;
    bool operator<(const Entry& o) const { return next_use < o.next_use; }
  };
  struct TierState {
    std::unordered_set<ChunkKey, ChunkKeyHash> resident;  // kept for their later uses
    std::priority_queue<Entry> heap;  // max next use on top; stale entries skipped
    std::unordered_map<ChunkKey, bool, ChunkKeyHash> transient;  // -> already read
    std::deque<ChunkKey> recycle;                                // transient chunks already read
    uint64_t transient_bytes = 0;  // transient chunks held or being placed
  };

  // REQUIRES: mu_ held. Queues a resident chunk's next use. Each read of a
  // resident file leaves a stale entry behind, and stale entries only leave
  // the heap when they reach its top (when evicting): without evictions the
  // heap would grow by one entry per read, so it is rebuilt from the
  // resident set once stale entries outnumber live ones.
  void Track(TierState& t, Entry e) {
    t.heap.push(e);
    if (t.heap.size() <= 2 * t.resident.size() + 64) return;
    std::vector<Entry> live;
    live.reserve(t.resident.size());
    for (ChunkKey k : t.resident) live.push_back({next_use_(k.node).next, k});
    t.heap = std::priority_queue<Entry>(std::less<Entry>(), std::move(live));
  }

  int Admit(ChunkKey key, size_t tier, bool transient) {
    std::lock_guard lock(mu_);
    placing_[key] = Placing{transient, transient ? next_use_(key.node).next : 0};
    if (transient) per_tier_[tier].transient_bytes += catalog_->length(key.node, key.chunk);
    return static_cast<int>(tier);
  }

  // REQUIRES: mu_ held. Picks what to evict from tier i for `key`, and
  // whether `key` would then be transient. False: promote nothing.
  bool ChooseVictim(size_t i, ChunkKey key, uint64_t bytes, ChunkKey* victim, bool* transient) {
    TierState& t = per_tier_[i];
    while (!t.recycle.empty()) {
      ChunkKey k = t.recycle.front();
      t.recycle.pop_front();
      if (t.transient.erase(k)) {
        t.transient_bytes -= catalog_->length(k.node, k.chunk);
        *victim = k;
        return true;
      }
    }
    const NextUses uses = next_use_(key.node);
    if (PopFarthest(t, uses.after, victim)) {
      *transient = false;
      return true;
    }
    // Transient chunks may take at most an eighth of the tier: more would
    // evict what is kept for later (large shards thrashed without it).
    const uint64_t transient_cap = std::max(bytes, tiers_[i]->limit() / 8);
    // ...and only in place of a chunk with no declared use left: evicting one
    // still needed would cost a SOURCE read later for a read served from the
    // tier now (with one epoch declared at a time, shards thrashed).
    if (t.transient.size() < transient_limit_ && t.transient_bytes + bytes <= transient_cap &&
        uses.next != OrderPlan::kNever && PopFarthest(t, OrderPlan::kNever - 1, victim)) {
      *transient = true;
      return true;
    }
    return false;
  }

  // REQUIRES: mu_ held. Takes the resident chunk needed farthest in the
  // future, if that is later than `than`.
  bool PopFarthest(TierState& t, uint64_t than, ChunkKey* victim) {
    while (!t.heap.empty()) {
      Entry top = t.heap.top();
      if (!t.resident.count(top.key)) {
        t.heap.pop();  // evicted already
        continue;
      }
      uint64_t now = next_use_(top.key.node).next;
      if (top.next_use != now) {  // its next use moved: requeue at the true value
        t.heap.pop();
        t.heap.push({now, top.key});
        continue;
      }
      if (top.next_use <= than) return false;
      t.heap.pop();
      t.resident.erase(top.key);
      *victim = top.key;
      return true;
    }
    return false;
  }

  const std::vector<Tier*> tiers_;
  const Evictor evict_;
  const Catalog* const catalog_;
  const NextUseFn next_use_;
  mutable std::mutex
      mu_;  // guards the rest; released before evicting (the evictor takes tier locks)
  std::vector<TierState> per_tier_;
  struct Placing {
    bool transient;
    uint64_t for_use;  // transient: the use it is promoted for
  };
  std::unordered_map<ChunkKey, Placing, ChunkKeyHash> placing_;  // placed, not yet published
  size_t transient_limit_ = 16;
};

}  // namespace

std::unique_ptr<ClairvoyantPolicy> NewClairvoyantPolicy(std::vector<Tier*> tiers, Evictor evict,
                                                        const Catalog* catalog,
                                                        NextUseFn next_use) {
  return std::make_unique<Clairvoyant>(std::move(tiers), std::move(evict), catalog,
                                       std::move(next_use));
}

}  // namespace tierfs
