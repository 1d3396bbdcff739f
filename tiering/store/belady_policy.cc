// BeladyPolicy (the `next-use` policy): first-fit while there is room. When a tier is full, for a
// candidate chunk, in order:
// 1. a transient chunk already read is dropped first (below);
// 2. if the resident chunk needed farthest in the future is needed later than
//    the candidate's use *after* the coming one, it is evicted and the
//    candidate is kept (Belady with bypass: worth keeping);
// 3. otherwise the candidate is only worth having for its coming read. It may
//    still be held *transient* (so that read is served from the tier),
//    evicting the farthest chunk that has no declared use left, while fewer
//    than the transient limit (the look-ahead window) are held and they take
//    at most 1/8 of the tier; once read it is the first to go, unless a use
//    has been declared for it since (the next epoch's order): then it is
//    kept like any resident. Else it is not promoted and is read from
//    SOURCE.
// Steady-state SOURCE traffic is then what cannot be resident plus at most
// the transient window.
#include <deque>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tiering/base/mutex.h"
#include "tiering/store/eviction_policy.h"

namespace tierfs {
namespace {

class Belady final : public BeladyPolicy {
 public:
  Belady(int tiers, const Catalog* catalog, const NextUseTable* next_uses)
      : catalog_(catalog), next_uses_(next_uses), per_tier_(static_cast<size_t>(tiers)) {}

  const char* name() const override { return "next-use"; }

  void SetTransientLimit(size_t chunks) override {
    MutexLock lock(mu_);
    transient_limit_ = std::max<size_t>(chunks, 1);
  }

  bool Admit(int tier, const Candidate& c, Hold* hold) override {
    MutexLock lock(mu_);
    TierState& t = per_tier_[static_cast<size_t>(tier)];
    *hold = Hold::kKept;
    if (ReadTransientFirst(t)) return true;  // it makes the room
    Entry farthest{};
    const bool any = Farthest(t, &farthest);
    if (!any && t.transient.empty()) return true;  // nothing here to displace
    const NextUses uses = NextUseOf(c.key);
    if (any && farthest.next_use > uses.after) return true;
    // Transient chunks may take at most an eighth of the tier: more would
    // evict what is kept for later (large shards thrashed without it)...
    const uint64_t transient_cap = std::max(c.bytes, c.tier_limit / 8);
    // ...and only in place of a chunk with no declared use left: evicting one
    // still needed would cost a SOURCE read later for a read served from the
    // tier now (with one epoch declared at a time, shards thrashed).
    if (t.transient.size() < transient_limit_ && t.transient_bytes + c.bytes <= transient_cap &&
        uses.next != NextUses::kNever && any && farthest.next_use == NextUses::kNever) {
      *hold = Hold::kTransient;
      return true;
    }
    return false;
  }

  bool NextVictim(int tier, ChunkKey* victim) override {
    MutexLock lock(mu_);
    TierState& t = per_tier_[static_cast<size_t>(tier)];
    if (TakeReadTransient(t, victim)) return true;
    Entry farthest{};
    if (!Farthest(t, &farthest)) return false;
    t.heap.pop();
    t.resident.erase(farthest.key);
    *victim = farthest.key;
    return true;
  }

  // Only a transient chunk already read: any chunk admitted would evict it
  // first. A chunk with a use still to come stays until a chunk needed
  // sooner asks for its room (evicting it ahead would cost a SOURCE read for
  // nothing when none comes), and one with no use left may get one when the
  // next epoch's order is declared (without an order, nothing ever goes).
  bool SpareVictim(int tier, ChunkKey* victim) override {
    MutexLock lock(mu_);
    return TakeReadTransient(per_tier_[static_cast<size_t>(tier)], victim);
  }

  void Admitted(ChunkKey key, int tier, Hold hold) override {
    const bool transient = hold == Hold::kTransient;
    const uint64_t for_use = transient ? NextUseOf(key).next_id : 0;
    MutexLock lock(mu_);
    placing_[key] = Placing{transient, for_use};
    if (transient) {
      per_tier_[static_cast<size_t>(tier)].transient_bytes += catalog_->length(key.node, key.chunk);
    }
  }

  void Published(ChunkKey key, int tier) override {
    MutexLock lock(mu_);
    TierState& t = per_tier_[static_cast<size_t>(tier)];
    auto it = placing_.find(key);
    bool transient = it != placing_.end() && it->second.transient;
    uint64_t for_use = transient ? it->second.for_use : 0;
    if (it != placing_.end()) placing_.erase(it);
    if (transient) {
      // A reader waiting for the chunk wakes at the catalog's Publish, before
      // this call, and may have consumed the use it was promoted for already.
      Settle(t, t.transient.insert_or_assign(key, Transient{false, for_use}).first);
    } else {
      t.resident.insert(key);
      Track(t, {NextUseOf(key).next, key});
    }
  }

  void Abandoned(ChunkKey key, int tier) override {
    MutexLock lock(mu_);
    auto it = placing_.find(key);
    if (it == placing_.end()) return;
    if (it->second.transient) {
      per_tier_[static_cast<size_t>(tier)].transient_bytes -= catalog_->length(key.node, key.chunk);
    }
    placing_.erase(it);
  }

  void Dropped(ChunkKey key, int tier) override {
    MutexLock lock(mu_);
    TierState& t = per_tier_[static_cast<size_t>(tier)];
    t.resident.erase(key);  // its heap entry is skipped when it reaches the top
    if (t.transient.erase(key)) t.transient_bytes -= catalog_->length(key.node, key.chunk);
  }

  void Touched(ChunkKey) override {}

  size_t entries() const override {
    MutexLock lock(mu_);
    size_t n = 0;
    for (const auto& t : per_tier_) n += t.heap.size();
    return n;
  }

  void NextUseChanged(NodeId node) override {
    MutexLock lock(mu_);
    for (uint32_t c = 0; c < catalog_->chunks(node); ++c) {
      ChunkKey key{node, c};
      for (auto& t : per_tier_) {
        if (auto tr = t.transient.find(key); tr != t.transient.end()) {
          Settle(t, tr);
        } else if (t.resident.count(key)) {
          Track(t, {NextUseOf(key).next, key});
        }
      }
    }
  }

 private:
  struct Entry {
    uint64_t next_use;
    ChunkKey key;
    bool operator<(const Entry& o) const { return next_use < o.next_use; }
  };
  struct Transient {
    bool read;         // its use is past: first to go
    uint64_t for_use;  // the use it was promoted for (NextUses::next_id)
  };
  using TransientMap = std::unordered_map<ChunkKey, Transient, ChunkKeyHash>;
  struct TierState {
    std::unordered_set<ChunkKey, ChunkKeyHash> resident;  // kept for their later uses
    std::priority_queue<Entry> heap;  // max next use on top; stale entries skipped
    TransientMap transient;
    std::deque<ChunkKey> recycle;  // transient chunks already read
    uint64_t transient_bytes = 0;  // transient chunks held or being placed
  };
  struct Placing {
    bool transient;
    uint64_t for_use;  // transient: the use it is promoted for
  };

  NextUses NextUseOf(ChunkKey key) const {
    return next_uses_ ? next_uses_->NextUse(key) : NextUses{};
  }

  // `it` is a transient chunk. Once the use it was
  // promoted for is past, it is the first to go; but if a use has been
  // declared for it since (the next epoch's order came), it is kept like any
  // resident: dropping it now would cost a SOURCE read in that epoch, and
  // with one epoch declared at a time the transient room would otherwise
  // bleed the kept set a little every epoch.
  void Settle(TierState& t, TransientMap::iterator it) REQUIRES(mu_) {
    const ChunkKey key = it->first;
    const NextUses uses = NextUseOf(key);
    if (uses.next_id == it->second.for_use) return;  // its read is still to come
    if (uses.next != NextUses::kNever) {
      t.transient.erase(it);
      t.transient_bytes -= catalog_->length(key.node, key.chunk);
      t.resident.insert(key);
      Track(t, {uses.next, key});
    } else if (!it->second.read) {
      it->second.read = true;
      t.recycle.push_back(key);
    }
  }

  // Queues a resident chunk's next use. Each read of a
  // resident file leaves a stale entry behind, and stale entries only leave
  // the heap when they reach its top (when evicting): without evictions the
  // heap would grow by one entry per read, so it is rebuilt from the
  // resident set once stale entries outnumber live ones.
  void Track(TierState& t, Entry e) REQUIRES(mu_) {
    t.heap.push(e);
    if (t.heap.size() <= 2 * t.resident.size() + 64) return;
    std::vector<Entry> live;
    live.reserve(t.resident.size());
    for (ChunkKey k : t.resident) live.push_back({NextUseOf(k).next, k});
    t.heap = std::priority_queue<Entry>(std::less<Entry>(), std::move(live));
  }

  // True if a transient chunk already read waits at the
  // front of `recycle` (stale entries before it, of chunks since kept,
  // evicted or held again, are dropped).
  bool ReadTransientFirst(TierState& t) REQUIRES(mu_) {
    while (!t.recycle.empty()) {
      auto tr = t.transient.find(t.recycle.front());
      if (tr != t.transient.end() && tr->second.read) return true;
      t.recycle.pop_front();
    }
    return false;
  }

  // Takes the transient chunk already read that waits
  // first into *victim, if any.
  bool TakeReadTransient(TierState& t, ChunkKey* victim) REQUIRES(mu_) {
    if (!ReadTransientFirst(t)) return false;
    const ChunkKey k = t.recycle.front();
    t.recycle.pop_front();
    t.transient.erase(k);
    t.transient_bytes -= catalog_->length(k.node, k.chunk);
    *victim = k;
    return true;
  }

  // The resident chunk needed farthest in the future, at
  // the top of the heap, with its next use now in *top; false if none.
  bool Farthest(TierState& t, Entry* top) REQUIRES(mu_) {
    while (!t.heap.empty()) {
      Entry e = t.heap.top();
      if (!t.resident.count(e.key)) {
        t.heap.pop();  // evicted already
        continue;
      }
      uint64_t now = NextUseOf(e.key).next;
      // Next uses count down as readers advance, all of a stream's alike, so
      // an entry is requeued only when its use moved later or came more than
      // twice as near: each entry is requeued O(log) times, not at every read.
      if (now > e.next_use || now < e.next_use / 2) {
        t.heap.pop();
        t.heap.push({now, e.key});
        continue;
      }
      *top = {now, e.key};
      return true;
    }
    return false;
  }

  const Catalog* const catalog_;
  const NextUseTable* const next_uses_;
  // Guards the rest. Lock order: before the next-use table's stripes (read
  // with it held, leaves); nothing else is called while it is held.
  mutable Mutex mu_;
  std::vector<TierState> per_tier_ GUARDED_BY(mu_);
  // admitted, not yet published
  std::unordered_map<ChunkKey, Placing, ChunkKeyHash> placing_ GUARDED_BY(mu_);
  size_t transient_limit_ GUARDED_BY(mu_) = 16;
};

}  // namespace

std::unique_ptr<BeladyPolicy> NewBeladyPolicy(int tiers, const Catalog* catalog,
                                              const NextUseTable* next_uses) {
  return std::make_unique<Belady>(tiers, catalog, next_uses);
}

}  // namespace tierfs
