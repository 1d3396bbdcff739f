// ChunkStore: the tiers, the catalog of where each chunk is, and the
// eviction policy; it owns the lifecycle of every chunk:
//
//   Claim:   ON_SOURCE -> IN_FLIGHT, a tier chosen (the fastest with room
//            to spare, else one whose policy admits the chunk) and the
//            chunk's bytes reserved; never an eviction: a claim the policy
//            admits into a tier short of room names the victims the policy
//            picks for it and kicks the tier's Reclaimer (reclaimer.h),
//            which evicts them on the store's JobRunner (a claim made on a
//            background thread, the planner's, evicts for itself when the
//            reclaimer is behind)
//   Reclaim: (the reclaimer's job) evict the named victims, then what the
//            policy gives up ahead of need until the tier's free room is
//            back above its high watermark; the tier's upkeep
//   Write:   the bytes streamed into the tier, invisible to readers
//   Publish: IN_FLIGHT -> RESIDENT(t)
//   or undo: reservation released, policy told, IN_FLIGHT -> ON_SOURCE
//
// A claim is an RAII object: every exit that did not publish (a failure, a
// cancelled job, an exception) undoes it, so no chunk stays in flight.
// Callers above (Promoter, ReadPath) copy bytes and read; they never step
// the lifecycle themselves, and nothing here calls back up.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/mutex.h"
#include "tiering/namespace/namespace.h"
#include "tiering/store/catalog.h"
#include "tiering/store/eviction_policy.h"
#include "tiering/store/in_flight.h"
#include "tiering/store/reclaimer.h"
#include "tiering/store/tier.h"

namespace tierfs {

class ChunkStore;

// Whose chunk a promotion stores: this node's own (it may evict to make
// room), or a copy of a chunk another node homes, which takes free room
// only, never displaces an own chunk, and is the first to go when one needs
// room.
enum class ClaimOwner { kOwn, kPeerCopy };

// The right to fill one chunk of one tier. Move-only; destroying or
// reassigning an unpublished claim undoes it.
class ChunkClaim {
 public:
  ChunkClaim() = default;
  ChunkClaim(ChunkClaim&& o) noexcept { *this = std::move(o); }
  ChunkClaim& operator=(ChunkClaim&& o) noexcept;
  ~ChunkClaim() { Undo(nullptr, 0); }

  explicit operator bool() const { return store_ != nullptr; }
  ChunkKey key() const { return key_; }
  int tier() const { return tier_; }
  uint64_t length() const { return length_; }

  // Appends bytes (the tier's writer is opened by the first call). 0 or
  // -errno; on error the caller should Fail the claim.
  int Write(const char* data, size_t n);
  // Commits the bytes (exactly length() must have been written) and makes
  // the chunk resident. 0, or -errno after undoing the claim.
  int Publish();
  // Undoes the claim for error `err` (-errno): counted as a failed
  // promotion and logged with `what`; ENOSPC/EDQUOT also mark the tier full.
  void Fail(int err, const char* what);

 private:
  friend class ChunkStore;
  void Undo(const char* what, int err);

  ChunkStore* store_ = nullptr;  // null: empty, or done
  ChunkKey key_;
  int tier_ = -1;
  uint64_t length_ = 0;
  std::unique_ptr<ChunkWriter> writer_;
  uint64_t written_ = 0;
  std::shared_ptr<InFlight> progress_;  // what readers of the chunk wait on
  ClaimOwner whose_ = ClaimOwner::kOwn;
};

struct StoreCounters {
  std::atomic<uint64_t> no_room{0};         // claims refused: fits in no tier
  std::atomic<uint64_t> done{0};            // chunks published
  std::atomic<uint64_t> failed{0};          // claims undone by Fail
  std::atomic<uint64_t> bytes{0};           // bytes published
  std::atomic<uint64_t> evicted{0};         // chunks evicted to make room
  std::atomic<uint64_t> dropped{0};         // resident chunks found unreadable in their tier
  std::atomic<uint64_t> copies_evicted{0};  // peers' chunks evicted for this node's own
  std::atomic<uint64_t> behind{0};          // claims a policy admitted, refused: room not made yet
};

class ChunkStore {
 public:
  enum class ClaimResult { kClaimed, kBusy, kNoRoom };
  // Why the last failed promotion of a file's chunk failed.
  enum class Failure : uint8_t {
    kNone,        // none failed
    kSource,      // reading SOURCE failed (an I/O error, a timeout, short)
    kPermission,  // EACCES or EPERM (reading SOURCE, or writing the tier)
    kTierFull,    // the tier's device filled up (ENOSPC, EDQUOT)
    kTier,        // writing or committing into the tier failed otherwise
  };

  // `catalog` must describe `ns`; `policy` must have been made for
  // tiers.size() tiers, this catalog and `next_uses` (null: the store makes
  // an empty table). Directory tiers must be recovered through
  // RecoverDirectoryTiers before the first claim. Evictions and tier upkeep
  // run on `reclaim_on` (InlineJobs: on the claimer's thread), which must
  // run no job of this store once it is destroyed.
  ChunkStore(const Namespace* ns, std::unique_ptr<Catalog> catalog,
             std::vector<std::unique_ptr<Tier>> tiers, std::unique_ptr<EvictionPolicy> policy,
             std::unique_ptr<NextUseTable> next_uses = nullptr,
             JobRunner* reclaim_on = InlineJobs::Get());

  // Reuses what directory tiers kept from an earlier mount of the same
  // `source` (an identity string the journals must name): complete copies
  // whose SOURCE file still has the recorded inode, size, mtime and ctime,
  // chunked alike. Returns the chunks made resident.
  uint64_t RecoverDirectoryTiers(const std::string& source = std::string());
  // Writes `text` into every directory tier's lock file (who holds it).
  void NoteTierHolder(std::string_view text);

  // Claims `key` for promotion. kBusy: it is not on SOURCE only (resident, or
  // in flight) or empty; kNoRoom: it fits in no tier, or no tier has room
  // yet (counted). A peer's copy takes free room only (see ClaimOwner).
  // Evicts nothing itself (unless the store's runner is InlineJobs, or on a
  // BackgroundClaims thread when the reclaimer is behind).
  // Thread-safe.
  ClaimResult Claim(ChunkKey key, ChunkClaim* out, ClaimOwner whose = ClaimOwner::kOwn);

  // Reads [off, off+n) of chunk `key` from the tier that `state` (its
  // resident catalog state) names. 0 when all n bytes are in *out (the
  // read is counted as the tier's hit unless `hit` is false: a reader
  // served from the copy its own miss just made; the policy is told
  // either way); else -errno, and a chunk that failed in its tier is
  // dropped from it (-ENOENT: evicted meanwhile).
  int Read(ChunkKey key, uint8_t state, uint64_t off, size_t n, char* scratch, TierRead* out,
           bool hit = true);

  uint8_t state(ChunkKey key) const { return catalog_->state(key); }
  // For a chunk in flight: waits until [off, off+n) of it is written, and
  // gives those bytes (first bytes early, the rest still being copied): 0.
  // -EAGAIN: the chunk was published or given up first (look at its state
  // again); -ETIMEDOUT: still not there at `deadline`.
  int ReadInFlight(ChunkKey key, uint64_t off, size_t n, InFlight::Deadline deadline,
                   TierRead* out);

  // A claim on a reader's thread whose victims are named waits this long at
  // most for the reclaimer to free their room: answered "no room" at once,
  // the reader would read SOURCE uncached while the evictions it asked for
  // free room that a look-ahead claim of the same chunk then takes (the
  // chunk read from SOURCE twice), and a full tier would cache no miss.
  static constexpr std::chrono::milliseconds kRoomWait{5};
  // Tests: another bound. Before any claim.
  void set_room_wait(std::chrono::milliseconds wait) { room_wait_ = wait; }

  const Namespace& ns() const { return *ns_; }
  const Catalog& catalog() const { return *catalog_; }
  const std::vector<Tier*>& tiers() const { return tiers_; }
  EvictionPolicy& policy() { return *policy_; }
  // When files are needed next: the planner writes it, the policy reads it.
  NextUseTable& next_uses() { return *next_uses_; }
  uint64_t tier_bytes() const;  // the sum of the tiers' budgets
  const StoreCounters& counters() const { return counters_; }
  // Why the last failed promotion of a chunk of `node` failed (kNone if none
  // did). Thread-safe.
  Failure LastFailure(NodeId node) const {
    return static_cast<Failure>(last_failure_[node].load(std::memory_order_relaxed));
  }

  // The tiers (a list) and this store's part of the "promotions" group.
  void VisitTiers(CounterVisitor& v) const;
  void VisitPromotions(CounterVisitor& v) const;

 private:
  friend class ChunkClaim;
  // Reserves `bytes` in the fastest tier with room to spare, else (for an
  // own chunk) in the fastest tier holding copies or whose policy admits
  // it, kicking that tier's reclaimer. The tier's index, or -1.
  int Place(ChunkKey key, uint64_t bytes, ClaimOwner whose);
  // For a chunk the policy admitted into tier `t`: reserves `bytes` there if
  // they fit (on a BackgroundClaims thread, after evicting for them if need
  // be), else names the victims that make the room, kicks the reclaimer and
  // waits for it until `wait_until`: the claim's deadline for room, set by
  // its first wait to kRoomWait from then (zero before), so that a claim
  // tried in several tiers waits kRoomWait in all.
  bool TakeRoom(int t, uint64_t bytes, bool* behind,
                std::chrono::steady_clock::time_point* wait_until);
  // Reserves `bytes` in tier `t` once room is freed, within the room wait; false if not.
  bool AwaitRoom(int t, uint64_t bytes, std::chrono::steady_clock::time_point* wait_until);
  // Room was freed in a tier: wake the claims waiting for it.
  void RoomFreed();
  // Names copies, then the policy's victims (NextVictim), until tier `t`'s
  // free room and the bytes of the victims named there make `bytes`.
  void NameVictims(int t, uint64_t bytes);
  // Evicts the victims named in tier `t`.
  void EvictNamed(int t);
  // The reclaimer's job for tier `t`: EvictNamed, EvictUntilFree to its
  // high watermark with spare victims only; then the tier's upkeep.
  void Reclaim(int t);
  // Which victims EvictUntilFree may take after copies: what the policy
  // names for a claim it admitted (NextVictim), or ahead of need (SpareVictim).
  enum class Victims { kForClaim, kSpare };
  // Evicts copies, then `which` victims, until tier `t` has `bytes` free or
  // nothing more may go.
  void EvictUntilFree(int t, uint64_t bytes, Victims which);
  // Evicts `victim` from tier `t` if it is still resident there (`copy`: a
  // peer's chunk, not the policy's pick); true if it was.
  bool EvictVictim(int t, ChunkKey victim, bool copy);
  // The free room `tier` keeps (none when reclaiming inline), in units of
  // the largest chunk claimed so far (small files make small chunks).
  Watermarks MarksOf(const Tier& tier) const;
  // A copy of a peer's chunk resident in tier `t`, if any; `take`: no
  // longer listed as a copy (it is named to go).
  bool CopyIn(int t, ChunkKey* copy, bool take = false);
  // Removes a resident chunk from `tier`; the bytes freed (0 if it was not there).
  uint64_t Evict(ChunkKey key, int tier);
  int Commit(ChunkClaim& claim);
  // Readers of the claimed chunk look at the catalog again.
  void Finish(ChunkClaim& claim);
  void Undo(ChunkClaim& claim, const char* what, int err);

  const Namespace* const ns_;
  const std::unique_ptr<Catalog> catalog_;
  const std::vector<std::unique_ptr<Tier>> owned_;
  std::vector<Tier*> tiers_;
  const std::unique_ptr<NextUseTable> next_uses_;  // before policy_: it reads it
  const std::unique_ptr<EvictionPolicy> policy_;
  InFlightTable in_flight_;
  StoreCounters counters_;
  std::atomic<uint64_t> largest_claim_{0};  // bytes of the largest chunk claimed
  // Per node of ns_: its last Failure (Undo stores, anyone loads).
  std::unique_ptr<std::atomic<uint8_t>[]> last_failure_;
  // Copies of peers' chunks, resident or being published.
  mutable Mutex copies_mu_;  // guards copies_. A leaf lock.
  std::unordered_set<ChunkKey, ChunkKeyHash> copies_ GUARDED_BY(copies_mu_);
  // Victims named for claims made on a reader's or the network's thread
  // (picked when the policy admitted the claim), for the reclaimer to evict.
  struct Named {
    ChunkKey key;
    bool copy = false;
  };
  // Guards named_ and named_bytes_. Lock order: before copies_mu_ and the
  // policy's lock (NameVictims asks them with it held); no I/O under it.
  Mutex named_mu_ ACQUIRED_BEFORE(copies_mu_);
  std::vector<std::vector<Named>> named_ GUARDED_BY(named_mu_);  // per tier
  std::vector<uint64_t> named_bytes_ GUARDED_BY(named_mu_);      // per tier: the bytes of named_
  // Claims waiting for room (AwaitRoom) and the evictions and undone
  // claims that free it. A leaf lock, held only to check and to wake.
  Mutex room_mu_;
  CondVar room_cv_;
  std::chrono::milliseconds room_wait_ = kRoomWait;
  Reclaimer reclaimer_;  // last: its jobs use the rest
};

}  // namespace tierfs
