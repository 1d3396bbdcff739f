#include "tiering/engine/read_path.h"

#include <cerrno>
#include <cstring>

#include "tiering/base/log_limiter.h"

namespace tierfs {

ReadPath::ReadPath(const Namespace* ns, ChunkSource* source, ChunkStore* store, Promoter* promoter,
                   std::chrono::milliseconds wait_limit)
    : ns_(ns), chunk_source_(source), store_(store), promoter_(promoter), wait_limit_(wait_limit) {}

ssize_t ReadPath::ReadLocal(NodeId id, uint64_t off, size_t size, char* scratch, TierRead* out,
                            InFlight::Deadline deadline) {
  bool hit = true;
  return ReadRange(id, off, size, scratch, out, &hit, Serving::kPeer, deadline);
}

bool ReadPath::Holds(NodeId id, uint32_t chunk) const {
  if (store_ == nullptr || !store_->catalog().tiered(id)) return false;
  return store_->state(ChunkKey{id, chunk}) != Catalog::kOnSource;
}

int ReadPath::Adopt(NodeId id, uint32_t chunk, const char* data, size_t n) {
  if (store_ == nullptr || promoter_ == nullptr || !store_->catalog().tiered(id)) return -ENOSPC;
  return promoter_->Adopt(ChunkKey{id, chunk}, data, n);
}

void ReadPath::NoteReadElsewhere(NodeId id) {
  if (store_ != nullptr) {
    const uint32_t n = store_->catalog().chunks(id);
    for (uint32_t c = 0; c < n; ++c) store_->policy().Touched(ChunkKey{id, c});
  }
  if (ReadObserver* observer = observer_.load(std::memory_order_relaxed)) {
    observer->OnRead(id, 0, ns_->node(id).size, true);
  }
}

ssize_t ReadPath::Read(NodeId id, uint64_t off, size_t size, char* scratch, TierRead* out) {
  bool hit = true;
  ssize_t n = ReadRange(id, off, size, scratch, out, &hit, Serving::kThisNode);
  // Only now: the planner may evict a file once it is consumed, and this
  // read must not lose its data to that (the reply holds what it needs).
  if (n > 0) {
    if (ReadObserver* observer = observer_.load(std::memory_order_relaxed)) {
      observer->OnRead(id, off, static_cast<uint64_t>(n), hit);
    }
  }
  return n;
}

ssize_t ReadPath::ReadRange(NodeId id, uint64_t off, size_t size, char* scratch, TierRead* out,
                            bool* hit, Serving serving, InFlight::Deadline asker) {
  const uint64_t file_size = ns_->node(id).size;
  *out = {};
  if (off >= file_size || size == 0) return 0;
  size = static_cast<size_t>(std::min<uint64_t>(size, file_size - off));
  if (store_ == nullptr || !store_->catalog().tiered(id)) {  // no tiers, or too large for them
    *hit = false;
    return ReadSource(ChunkKey{id, 0}, off, size, scratch, out);
  }
  const uint64_t chunk_size = store_->catalog().chunk_size();
  ChunkKey key{id, static_cast<uint32_t>(off / chunk_size)};
  uint64_t in_chunk = off % chunk_size;
  if (in_chunk + size <= chunk_size)
    return ReadChunk(key, in_chunk, size, scratch, out, hit, serving, asker);
  // The request straddles chunks: assemble the pieces in scratch.
  size_t done = 0;
  while (done < size) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(size - done, chunk_size - in_chunk));
    TierRead piece;
    ssize_t r = ReadChunk(key, in_chunk, n, scratch + done, &piece, hit, serving, asker);
    if (r < 0) return r;
    if (piece.data != scratch + done) std::memcpy(scratch + done, piece.data, piece.size);
    done += static_cast<size_t>(r);
    if (static_cast<size_t>(r) < n) break;
    key.chunk++;
    in_chunk = 0;
  }
  out->data = scratch;
  out->size = done;
  return static_cast<ssize_t>(done);
}

// One read of a chunk across its looks at the chunk's state: what it asks
// for, and what it has done already (each transition at most once).
struct ReadPath::ChunkRead {
  const ChunkKey key;
  const uint64_t off;  // within the chunk
  const size_t n;
  char* const scratch;
  TierRead* const out;
  const Serving serving;
  const InFlight::Deadline asker;  // a peer's; max() for this node's reads
  bool missed = false;             // not resident at the first look: not a hit
  bool requested = false;          // a promotion was asked for
  bool hurried = false;            // a queued copy was hurried
  InFlight::Deadline deadline{};   // of the wait for a promotion, once it began
};

namespace {

// The chunk's state as a read sees it.
enum class Seen { kResident, kInFlight, kOnSource };

Seen SeenAs(uint8_t state) {
  if (Catalog::IsResident(state)) return Seen::kResident;
  return state == Catalog::kInFlight ? Seen::kInFlight : Seen::kOnSource;
}

// A promotion failing or evicted as soon as made could keep a read looking:
// after this many looks it is served as a miss not kept (the home, then
// SOURCE).
constexpr int kLooks = 3;

}  // namespace

ssize_t ReadPath::ReadChunk(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out,
                            bool* hit, Serving serving, InFlight::Deadline asker) {
  ChunkRead r{key, off, n, scratch, out, serving, asker};
  for (int look = 0; look < kLooks; ++look) {
    const uint8_t state = store_->state(key);
    ChunkStep step;
    switch (SeenAs(state)) {
      case Seen::kResident:
        step = ReadResident(r, state);
        break;
      case Seen::kInFlight:
        *hit = false, r.missed = true;
        step = AwaitPromotion(r);
        break;
      case Seen::kOnSource:
        *hit = false, r.missed = true;
        step = PromoteOnMiss(r);
        break;
    }
    if (step.answered) return step.result;
  }
  return ReadUncached(key, off, n, scratch, out, serving);  // the home, then SOURCE
}

// Resident: from its tier. A chunk evicted meanwhile (normal) or a tier that
// fails is read from SOURCE, which holds every byte.
ReadPath::ChunkStep ReadPath::ReadResident(ChunkRead& r, uint8_t state) {
  const int err = store_->Read(r.key, state, r.off, r.n, r.scratch, r.out, /*hit=*/!r.missed);
  if (err == 0) {
    (r.missed ? counters_.promoted_reads : counters_.tier_reads)
        .fetch_add(1, std::memory_order_relaxed);
    return {true, static_cast<ssize_t>(r.n)};
  }
  if (err != -ENOENT) {  // ENOENT: evicted meanwhile, which is normal
    counters_.tier_errors.fetch_add(1, std::memory_order_relaxed);
    TIERFS_LOG_SAMPLED(kWarning, "tier {} read of '{}' failed ({}); served from SOURCE",
                       store_->tiers()[static_cast<size_t>(Catalog::TierOf(state))]->name(),
                       ns_->Path(r.key.node), std::strerror(-err));
  }
  return {true, ReadSource(r.key, r.off, r.n, r.scratch, r.out)};
}

// In flight: a copy still queued (stage-in, look-ahead) is started now
// rather than left behind the queue ahead of it; then the promotion is
// waited for, rather than SOURCE read a second time, but only for the bytes
// this read needs, and not forever.
ReadPath::ChunkStep ReadPath::AwaitPromotion(ChunkRead& r) {
  if (!r.hurried && promoter_ != nullptr) {
    r.hurried = true;
    if (promoter_->Hurry(r.key)) return {};
  }
  counters_.waits.fetch_add(1, std::memory_order_relaxed);
  if (r.deadline == InFlight::Deadline{}) {
    r.deadline = std::min(r.asker, std::chrono::steady_clock::now() + wait_limit_);
  }
  const int err = store_->ReadInFlight(r.key, r.off, r.n, r.deadline, r.out);
  if (err == 0) {
    counters_.early_reads.fetch_add(1, std::memory_order_relaxed);
    return {true, static_cast<ssize_t>(r.n)};
  }
  if (err != -ETIMEDOUT) return {};  // it ended (resident, or failed): look again
  counters_.wait_timeouts.fetch_add(1, std::memory_order_relaxed);
  // A peer that asked has given up by now: no SOURCE read for nobody.
  if (std::chrono::steady_clock::now() >= r.asker) return {true, -ETIMEDOUT};
  // The promotion is stuck (a slow OST, a full pool, a home that does not
  // answer): SOURCE, not the home it may be waiting for.
  return {true, ReadSource(r.key, r.off, r.n, r.scratch, r.out)};
}

// On SOURCE only: promoted (first access, Monarch) once per read, and
// waited for. A chunk of at most one SOURCE request is copied by this
// thread: the reader needs all of it about as soon as the copy has it, and
// a hand-off to a pool thread and back costs more CPU than the copy. A
// larger one goes to the pool and is waited for (its first bytes early).
ReadPath::ChunkStep ReadPath::PromoteOnMiss(ChunkRead& r) {
  auto uncached = [&] {
    return ChunkStep{true, ReadUncached(r.key, r.off, r.n, r.scratch, r.out, r.serving)};
  };
  if (r.requested || promoter_ == nullptr) return uncached();
  r.requested = true;
  if (r.off != 0 && WasBypassed(r.key)) {
    counters_.bypass_kept.fetch_add(1, std::memory_order_relaxed);
    return uncached();
  }
  Promoter::Serve serve{r.off, r.n, r.scratch};
  const Promoter::Outcome outcome =
      store_->catalog().length(r.key.node, r.key.chunk) <= Promoter::kReadSize
          ? promoter_->PromoteHere(r.key, r.serving, &serve)
          : promoter_->Request(r.key, Executor::Lane::kForeground, r.serving);
  switch (outcome) {
    case Promoter::Outcome::kServed:  // from the copy, its commit on a pool thread
      counters_.copy_reads.fetch_add(1, std::memory_order_relaxed);
      PromoteRestOf(r.key);
      r.out->data = r.scratch;
      r.out->size = r.n;
      return {true, static_cast<ssize_t>(r.n)};
    case Promoter::Outcome::kStarted:  // now resident, in flight, or on SOURCE (failed)
      PromoteRestOf(r.key);
      return {};
    case Promoter::Outcome::kBusy:
      // Another reader's promotion since the look: wait for it. Its claim
      // is listed in flight before the catalog says so, so looking again
      // could still see "on SOURCE" and read SOURCE a second time.
      return AwaitPromotion(r);
    case Promoter::Outcome::kNoRoom:
    case Promoter::Outcome::kLaneFull:
      NoteBypassed(r.key);
      return uncached();
  }
  return uncached();
}

ssize_t ReadPath::ReadUncached(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out,
                               Serving serving) {
  HomeLink home = chunk_source_->HomeFor(key, serving);
  ssize_t r = chunk_source_->Read(key, off, n, scratch, &home);
  if (r < 0) return r;
  if (!home.is_source()) {
    counters_.peer_reads.fetch_add(1, std::memory_order_relaxed);
    counters_.peer_bytes.fetch_add(static_cast<uint64_t>(r), std::memory_order_relaxed);
  } else {
    CountSource(r);
  }
  out->data = scratch;
  out->size = static_cast<size_t>(r);
  return r;
}

namespace {
uint64_t BypassSlotValue(ChunkKey key) {
  return (static_cast<uint64_t>(key.node) + 1) << 32 | key.chunk;
}
}  // namespace

bool ReadPath::WasBypassed(ChunkKey key) const {
  return bypassed_[key.node % kBypassSlots].load(std::memory_order_relaxed) == BypassSlotValue(key);
}

void ReadPath::NoteBypassed(ChunkKey key) {
  bypassed_[key.node % kBypassSlots].store(BypassSlotValue(key), std::memory_order_relaxed);
}

void ReadPath::PromoteRestOf(ChunkKey key) {
  // A large file read from one chunk is likely read on: queue its other
  // chunks, until the lane is full or the tiers have no room (the rest is
  // promoted when it is read).
  for (uint32_t c = key.chunk + 1; c < store_->catalog().chunks(key.node); ++c) {
    const Promoter::Outcome o =
        promoter_->Request(ChunkKey{key.node, c}, Executor::Lane::kBackground);
    if (o == Promoter::Outcome::kNoRoom || o == Promoter::Outcome::kLaneFull) break;
  }
}

ssize_t ReadPath::ReadSource(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out) {
  uint64_t file_off = store_ ? key.chunk * store_->catalog().chunk_size() + off : off;
  ssize_t r = chunk_source_->ReadFile(key.node, file_off, n, scratch);
  if (r < 0) return r;
  CountSource(r);
  out->data = scratch;
  out->size = static_cast<size_t>(r);
  return r;
}

void ReadPath::CountSource(ssize_t bytes) {
  counters_.source_reads.fetch_add(1, std::memory_order_relaxed);
  counters_.source_bytes.fetch_add(static_cast<uint64_t>(bytes), std::memory_order_relaxed);
}

void ReadPath::VisitCounters(CounterVisitor& v) const {
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  // Each in parts of reads (a read's bytes within one chunk), as every tier's
  // hits: a read of the kernel (requests.read) is one part or more.
  v.Counter("from_tiers", load(counters_.tier_reads),
            {"Parts of reads served from a tier, resident when asked for (hits).", Unit::kParts});
  v.Counter("after_promotion", load(counters_.promoted_reads),
            {"Parts of reads served from a tier once the promotion their miss started or waited "
             "for had finished (misses).",
             Unit::kParts});
  v.Counter("from_source", load(counters_.source_reads),
            {"Parts of reads served from SOURCE.", Unit::kParts});
  v.Counter("source_bytes", load(counters_.source_bytes),
            {"Bytes of reads served from SOURCE.", Unit::kBytes});
  v.Counter("waits", load(counters_.waits),
            {"Parts of reads that waited for a promotion in flight.", Unit::kParts, "waited"});
  v.Counter(
      "early", load(counters_.early_reads),
      {"Parts of reads that waited and were served before the promotion completed.", Unit::kParts});
  v.Counter("wait_timeouts", load(counters_.wait_timeouts),
            {"Parts of reads that gave up waiting for a promotion and read SOURCE.", Unit::kParts,
             "wait_timeout"});
  v.Counter("tier_errors", load(counters_.tier_errors),
            {"Parts of reads whose tier read failed (then served from SOURCE).", Unit::kParts,
             "tier_error"});
  v.Counter("from_peers", load(counters_.peer_reads),
            {"Parts of reads fetched from another node and not kept.", Unit::kParts});
  v.Counter("peer_bytes", load(counters_.peer_bytes),
            {"Bytes of reads fetched from another node and not kept.", Unit::kBytes});
  v.Counter("from_copy", load(counters_.copy_reads),
            {"Parts of reads that missed, served from the reader's own copy while the tier "
             "commits it.",
             Unit::kParts});
  v.Counter("bypass_kept", load(counters_.bypass_kept),
            {"Parts of reads that missed, left on SOURCE because they had been read from there "
             "already.",
             Unit::kParts});
}

}  // namespace tierfs
