#include "tiering/store/chunk_store.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "tiering/base/log.h"

namespace tierfs {
namespace {

// A tier as its user named it: "the RAM tier", or "tier '/nvme/tierfs'".
std::string Shown(const Tier& tier) {
  if (tier.kind() == Tier::Kind::kMemory) return "the RAM tier";
  return fmt::format("tier '{}'", static_cast<const DirectoryTier&>(tier).path());
}

}  // namespace

ChunkClaim& ChunkClaim::operator=(ChunkClaim&& o) noexcept {
  if (this != &o) {
    Undo(nullptr, 0);
    store_ = std::exchange(o.store_, nullptr);
    key_ = o.key_;
    tier_ = o.tier_;
    length_ = o.length_;
    writer_ = std::move(o.writer_);
    written_ = o.written_;
    progress_ = std::move(o.progress_);
    whose_ = o.whose_;
  }
  return *this;
}

int ChunkClaim::Write(const char* data, size_t n) {
  if (store_ == nullptr) return -EBADF;
  if (written_ + n > length_) return -EOVERFLOW;  // more than was reserved
  if (!writer_) {
    const Node& node = store_->ns().node(key_.node);
    ChunkOrigin origin{store_->ns().Path(key_.node),
                       node.size,
                       node.mtime_ns,
                       key_.chunk,
                       length_,
                       node.ctime_ns,
                       node.ino,
                       uint64_t{key_.chunk} * store_->catalog().chunk_size()};
    Tier* tier = store_->tiers()[static_cast<size_t>(tier_)];
    if (int err = tier->BeginStore(key_, origin, &writer_); err < 0) return err;
  }
  if (int err = writer_->Append(data, n); err < 0) return err;
  written_ += n;
  std::shared_ptr<const void> hold;
  const char* contents = writer_->Contents(&hold);
  progress_->Progress(written_, contents, std::move(hold));
  return 0;
}

int ChunkClaim::Publish() {
  if (store_ == nullptr) return -EBADF;
  return store_->Commit(*this);
}

void ChunkClaim::Fail(int err, const char* what) { Undo(what, err); }

void ChunkClaim::Undo(const char* what, int err) {
  if (store_ != nullptr) store_->Undo(*this, what, err);
}

ChunkStore::ChunkStore(const Namespace* ns, std::unique_ptr<Catalog> catalog,
                       std::vector<std::unique_ptr<Tier>> tiers,
                       std::unique_ptr<EvictionPolicy> policy,
                       std::unique_ptr<NextUseTable> next_uses, JobRunner* reclaim_on)
    : ns_(ns),
      catalog_(std::move(catalog)),
      owned_(std::move(tiers)),
      next_uses_(next_uses ? std::move(next_uses) : std::make_unique<NextUseTable>(ns->size())),
      policy_(std::move(policy)),
      last_failure_(std::make_unique<std::atomic<uint8_t>[]>(ns->size())),
      named_(owned_.size()),
      named_bytes_(owned_.size()),
      reclaimer_(reclaim_on, owned_.size(), [this](int t) { Reclaim(t); }) {
  for (const auto& t : owned_) tiers_.push_back(t.get());
}

void ChunkStore::NoteTierHolder(std::string_view text) {
  for (Tier* t : tiers_) {
    if (t->kind() != Tier::Kind::kDirectory) continue;
    auto* dir = static_cast<DirectoryTier*>(t);
    if (int err = dir->NoteHolder(text); err < 0) {
      TIERFS_LOG(kWarning, "tier '{}': cannot note this daemon in its lock file: {}", dir->path(),
                 std::strerror(-err));
    }
  }
}

uint64_t ChunkStore::RecoverDirectoryTiers(const std::string& source) {
  uint64_t reused = 0;
  for (size_t i = 0; i < tiers_.size(); ++i) {
    if (tiers_[i]->kind() != Tier::Kind::kDirectory) continue;
    auto* dir = static_cast<DirectoryTier*>(tiers_[i]);
    const Catalog* catalog = catalog_.get();
    const Namespace* ns = ns_;
    std::vector<ChunkKey> kept;
    int err = dir->Recover(
        source,
        [ns, catalog](const ChunkOrigin& o) -> std::optional<ChunkKey> {
          auto id = ns->Resolve(o.path);
          if (!id || !S_ISREG(ns->node(*id).mode)) return std::nullopt;
          const Node& n = ns->node(*id);
          if (FileIdentity::Of(n) != o.file()) {
            return std::nullopt;  // stale: another file now, or rewritten since the copy
          }
          if (o.chunk >= catalog->chunks(*id) || catalog->length(*id, o.chunk) != o.length ||
              o.offset != uint64_t{o.chunk} * catalog->chunk_size()) {
            return std::nullopt;  // chunked with another chunk size
          }
          return ChunkKey{*id, o.chunk};
        },
        &kept);
    if (err < 0) {  // the tier emptied itself and takes no promotions this mount
      TIERFS_LOG(kError, "tier '{}': recovery failed ({}); it is left empty and unused",
                 dir->path(), std::strerror(-err));
      continue;
    }
    for (ChunkKey key : kept) {
      if (!catalog_->Recover(key, static_cast<int>(i))) continue;
      policy_->Admitted(key, static_cast<int>(i), Hold::kKept);
      policy_->Published(key, static_cast<int>(i));
      reused++;
    }
  }
  return reused;
}

ChunkStore::ClaimResult ChunkStore::Claim(ChunkKey key, ChunkClaim* out, ClaimOwner whose) {
  if (catalog_->state(key) != Catalog::kOnSource) return ClaimResult::kBusy;  // cheap check first
  const uint64_t length = catalog_->length(key.node, key.chunk);
  if (length == 0) return ClaimResult::kBusy;
  // Listed before the catalog says "in flight" (a reader that sees it finds
  // this entry to wait on); removed if another claim won the catalog.
  std::shared_ptr<InFlight> progress = in_flight_.TryAdd(key);
  if (!progress) return ClaimResult::kBusy;
  if (!catalog_->TryBegin(key)) {
    in_flight_.Remove(key);
    progress->Finish();
    return ClaimResult::kBusy;
  }
  for (uint64_t l = largest_claim_.load();
       l < length && !largest_claim_.compare_exchange_weak(l, length);) {
  }
  int tier = Place(key, length, whose);
  if (tier < 0) {
    counters_.no_room.fetch_add(1, std::memory_order_relaxed);
    catalog_->Abort(key);
    in_flight_.Remove(key);
    progress->Finish();
    return ClaimResult::kNoRoom;
  }
  ChunkClaim claim;
  claim.store_ = this;
  claim.key_ = key;
  claim.tier_ = tier;
  claim.length_ = length;
  claim.progress_ = std::move(progress);
  claim.whose_ = whose;
  *out = std::move(claim);
  return ClaimResult::kClaimed;
}

int ChunkStore::Place(ChunkKey key, uint64_t bytes, ClaimOwner whose) {
  // First fit: the fastest tier with room to spare (its free room stays at
  // or above the low watermark).
  for (size_t i = 0; i < tiers_.size(); ++i) {
    Tier* tier = tiers_[i];
    if (!tier->Reserve(bytes, MarksOf(*tier).low)) continue;
    policy_->Admitted(key, static_cast<int>(i), Hold::kKept);
    return static_cast<int>(i);
  }
  if (whose == ClaimOwner::kPeerCopy) return -1;
  // All short of room. This node's own chunk goes before any copy of a
  // peer's (the reclaimer evicts copies first): a copy saves a transfer
  // between nodes, the own chunk a PFS read for the job.
  bool behind = false;
  std::chrono::steady_clock::time_point wait_until{};  // a reader's claim waits once for room
  ChunkKey copy;
  for (size_t i = 0; i < tiers_.size(); ++i) {
    const int t = static_cast<int>(i);
    if (bytes <= tiers_[i]->limit() && CopyIn(t, &copy) &&
        TakeRoom(t, bytes, &behind, &wait_until)) {
      policy_->Admitted(key, t, Hold::kKept);
      return t;
    }
  }
  // The fastest tier that could ever hold the chunk and whose policy finds
  // it worth what the reclaimer will evict for it.
  for (size_t i = 0; i < tiers_.size(); ++i) {
    const int t = static_cast<int>(i);
    if (bytes > tiers_[i]->limit()) continue;
    Hold hold = Hold::kKept;
    if (!policy_->Admit(t, Candidate{key, bytes, tiers_[i]->limit()}, &hold)) {
      // Not worth an eviction, but free room is free: it may take that, as
      // it always could (first-fit fills a tier to its limit).
      if (!tiers_[i]->Reserve(bytes)) continue;
      policy_->Admitted(key, t, Hold::kKept);
      return t;
    }
    if (TakeRoom(t, bytes, &behind, &wait_until)) {
      policy_->Admitted(key, t, hold);
      return t;
    }
  }
  if (behind) counters_.behind.fetch_add(1, std::memory_order_relaxed);
  return -1;
}

bool ChunkStore::TakeRoom(int t, uint64_t bytes, bool* behind,
                          std::chrono::steady_clock::time_point* wait_until) {
  Tier* tier = tiers_[static_cast<size_t>(t)];
  bool taken = tier->Reserve(bytes);  // below the low watermark: the reclaimer restores it
  const bool evict_here = !taken && (reclaimer_.runs_inline() || BackgroundClaims::here());
  if (evict_here) {
    // The reclaimer is behind (or there is none). A background thread (the
    // planner's look-ahead) evicts for the chunk the policy admitted, as a
    // claim did before the reclaimer: Belady's order keeps its result.
    EvictNamed(t);
    EvictUntilFree(t, bytes, Victims::kForClaim);
    taken = tier->Reserve(bytes);
  } else if (!taken) {
    // A reader's thread names the victims the policy picks now for this
    // chunk (the reclaimer evicts those, not what the policy would pick
    // when it runs) and waits a little for their room; then "no room".
    NameVictims(t, bytes);
  }
  reclaimer_.Kick(t);
  if (!taken && !evict_here) taken = AwaitRoom(t, bytes, wait_until);
  if (!taken) *behind = true;
  return taken;
}

bool ChunkStore::AwaitRoom(int t, uint64_t bytes,
                           std::chrono::steady_clock::time_point* wait_until) {
  Tier* tier = tiers_[static_cast<size_t>(t)];
  if (*wait_until == std::chrono::steady_clock::time_point{}) {
    *wait_until = std::chrono::steady_clock::now() + room_wait_;
  }
  const auto deadline = *wait_until;
  MutexLock lock(room_mu_);
  // Reserve is checked under room_mu_, which RoomFreed takes after each
  // release: a release is either seen here or wakes this wait.
  return room_cv_.WaitUntil(room_mu_, deadline, [&] { return tier->Reserve(bytes); });
}

void ChunkStore::RoomFreed() {
  { MutexLock lock(room_mu_); }
  room_cv_.NotifyAll();
}

uint64_t ChunkStore::Evict(ChunkKey key, int tier_index) {
  // Remove the data before the catalog says "on SOURCE": while the state is
  // still resident no new promotion of the key can start and store into the
  // tier under the same key. A reader that loses the race falls back to SOURCE.
  if (catalog_->state(key) != Catalog::kResidentBase + tier_index) return 0;
  Tier* tier = tiers_[static_cast<size_t>(tier_index)];
  uint64_t bytes = tier->Remove(key);  // of racing evictors, one gets the bytes
  // Only the evictor that removed the bytes moves the catalog on. Another
  // one (a reader that found the chunk gone, a second picker) may have
  // stalled here while that eviction finished and a new promotion of the
  // same key published it again: its compare-and-swap would then succeed
  // on the new copy and leave it in the tier, unknown to the catalog.
  if (bytes == 0) return 0;
  {
    MutexLock lock(copies_mu_);
    copies_.erase(key);
  }
  catalog_->Evict(key, tier_index);
  tier->Release(bytes);
  RoomFreed();
  return bytes;
}

int ChunkStore::Commit(ChunkClaim& claim) {
  int err = claim.written_ == claim.length_ ? 0 : -EIO;
  if (err == 0 && !claim.writer_) err = -EIO;
  if (err == 0) err = claim.writer_->Commit();
  if (err < 0) {
    Undo(claim, "tier commit failed", err);
    return err;
  }
  claim.writer_.reset();
  const ChunkKey key = claim.key_;
  const int tier = claim.tier_;
  claim.store_ = nullptr;  // published: nothing left to undo
  if (claim.whose_ ==
      ClaimOwner::kPeerCopy) {  // listed before it is resident: no eviction misses it
    MutexLock lock(copies_mu_);
    copies_.insert(key);
  }
  catalog_->Publish(key, tier);
  Finish(claim);
  policy_->Published(key, tier);
  if (tiers_[static_cast<size_t>(tier)]->maintenance_due()) reclaimer_.Kick(tier);
  counters_.done.fetch_add(1, std::memory_order_relaxed);
  counters_.bytes.fetch_add(claim.length_, std::memory_order_relaxed);
  return 0;
}

void ChunkStore::Undo(ChunkClaim& claim, const char* what, int err) {
  claim.store_ = nullptr;
  claim.writer_.reset();  // a writer destroyed before Commit removes what it wrote
  Tier* tier = tiers_[static_cast<size_t>(claim.tier_)];
  tier->Release(claim.length_);
  RoomFreed();
  policy_->Abandoned(claim.key_, claim.tier_);
  if (err == -ENOSPC || err == -EDQUOT) {
    // The device filled before the budget did: stop placing there (said
    // once: the copies already under way meet the same full disk).
    const bool was_full = tier->limit() <= tier->used();
    tier->MarkFull();
    if (!was_full) {
      TIERFS_LOG(kWarning, "{} is full at {} bytes ({}); no more promotions go there", Shown(*tier),
                 tier->used(), std::strerror(-err));
    }
  }
  catalog_->Abort(claim.key_);
  Finish(claim);
  if (what == nullptr) return;  // dropped unrun (shutdown): not a failure
  const bool source = std::string_view(what).rfind("SOURCE", 0) == 0;
  const Failure failure = err == -EACCES || err == -EPERM    ? Failure::kPermission
                          : source                           ? Failure::kSource
                          : err == -ENOSPC || err == -EDQUOT ? Failure::kTierFull
                                                             : Failure::kTier;
  if (err != -ECANCELED) {
    last_failure_[claim.key_.node].store(static_cast<uint8_t>(failure), std::memory_order_relaxed);
  }
  uint64_t n = counters_.failed.fetch_add(1, std::memory_order_relaxed);
  if (err != -ECANCELED && (n < 10 || n % 1000 == 0)) {
    TIERFS_LOG(kWarning, "promotion of '{}' chunk {} to {} failed: {}: {}",
               ns_->Path(claim.key_.node), claim.key_.chunk, Shown(*tier), what,
               std::strerror(-err));
  }
}

void ChunkStore::Finish(ChunkClaim& claim) {
  in_flight_.Remove(claim.key_);
  claim.progress_->Finish();
  claim.progress_.reset();
}

int ChunkStore::ReadInFlight(ChunkKey key, uint64_t off, size_t n, InFlight::Deadline deadline,
                             TierRead* out) {
  if (std::shared_ptr<InFlight> chunk = in_flight_.Find(key)) {
    // Served from the copy being written: bytes just read from SOURCE for
    // this miss, not a tier hit (the read path counts it as `early`).
    return chunk->Read(off, n, deadline, out);
  }
  // Not listed: the catalog no longer says "in flight" (an entry is listed
  // before it does and removed after): look again.
  return -EAGAIN;
}

int ChunkStore::Read(ChunkKey key, uint8_t state, uint64_t off, size_t n, char* scratch,
                     TierRead* out, bool hit) {
  const int t = Catalog::TierOf(state);
  Tier* tier = tiers_[static_cast<size_t>(t)];
  int err = tier->Read(key, off, n, scratch, out);
  if (err == 0 && out->size == n) {
    if (hit) tier->CountHit(n);
    policy_->Touched(key);
    return 0;
  }
  if (err == 0) err = -EIO;  // a copy shorter than recorded is damaged
  // Evicted meanwhile (the catalog moved on), or broken in the tier: then
  // drop it, so it is promoted afresh instead of failing every read.
  if (catalog_->state(key) == state && Evict(key, t) > 0) {
    policy_->Dropped(key, t);
    counters_.dropped.fetch_add(1, std::memory_order_relaxed);
    if (err == -ENOENT) err = -EIO;  // not an eviction: the tier lost it
  }
  return err;
}

uint64_t ChunkStore::tier_bytes() const {
  uint64_t total = 0;
  for (const Tier* t : tiers_) total += t->budget();
  return total;
}

void ChunkStore::VisitTiers(CounterVisitor& v) const {
  std::vector<uint64_t> chunks = catalog_->ResidentChunksPerTier(static_cast<int>(tiers_.size()));
  v.BeginList("tiers", "tier");
  for (size_t i = 0; i < tiers_.size(); ++i) {
    const Tier* t = tiers_[i];
    const bool memory = t->kind() == Tier::Kind::kMemory;
    const std::string path = memory ? "" : static_cast<const DirectoryTier*>(t)->path();
    v.BeginItem({{"name", t->name()}, {"kind", memory ? "memory" : "directory"}, {"path", path}});
    v.Gauge("budget", static_cast<double>(t->budget()),
            {"Bytes the tier may hold, as configured.", Unit::kBytes});
    v.Gauge("limit", static_cast<double>(t->limit()),
            {"Bytes the tier may hold now (lowered to its use when the device filled up).",
             Unit::kBytes});
    v.Gauge("used", static_cast<double>(t->used()),
            {"Bytes of chunks held or being written in the tier.", Unit::kBytes});
    v.Gauge("chunks", static_cast<double>(chunks[i]), {"Chunks resident in the tier."});
    v.Counter("hits", t->hits(),
              {"Parts of reads served from the tier, resident when asked for (hits).", Unit::kParts,
               "hit"});
    v.Counter("bytes_served", t->bytes_served(),
              {"Bytes read from the tier to serve reads.", Unit::kBytes, "served"});
    if (!memory) {
      v.Gauge("open_files", static_cast<double>(static_cast<const DirectoryTier*>(t)->open_files()),
              {"Tier files a directory tier holds open for reading.", Unit::kFiles, "open"});
    }
    v.EndItem();
  }
  v.EndList();
}

void ChunkStore::VisitPromotions(CounterVisitor& v) const {
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  // Files larger than any tier: read from SOURCE, never promoted.
  v.Gauge("untiered_files", static_cast<double>(catalog_->untiered_files()),
          {"Files larger than any tier: always read from SOURCE."});
  v.Counter("done", load(counters_.done), {"Chunks promoted into a tier."});
  v.Counter("failed", load(counters_.failed), {"Chunk promotions that failed."});
  v.Counter("no_room", load(counters_.no_room),
            {"Chunk promotions refused because the chunk fit in no tier."});
  v.Counter("evicted", load(counters_.evicted), {"Chunks evicted to make room."});
  v.Counter("dropped", load(counters_.dropped),
            {"Resident chunks found unreadable in their tier and dropped."});
  v.Counter("copies_evicted", load(counters_.copies_evicted),
            {"Chunks that another node keeps, evicted to make room for chunks this node keeps."});
  v.Counter("reclaim_behind", load(counters_.behind),
            {"Chunk promotions refused because the tiers' room was still being made after a few "
             "milliseconds (evictions run in the background)."});
  v.Counter("reclaims", reclaimer_.runs(),
            {"Runs of the background job that evicts to keep free room in the tiers."});
  v.Counter("bytes", load(counters_.bytes), {"Bytes promoted into the tiers.", Unit::kBytes});
  v.Gauge("files_resident", static_cast<double>(catalog_->FullyResidentFiles()),
          {"Files whose every chunk is resident in a tier.", Unit::kFiles, "resident"});
  v.Gauge("policy_entries", static_cast<double>(policy_->entries()),
          {"Entries the eviction policy keeps to order evictions (its memory)."});
}

}  // namespace tierfs
