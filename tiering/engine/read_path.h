// ReadPath: serves a read from whichever place holds the bytes now. A chunk
// resident in a tier is read from it; one in flight is waited for; one on
// SOURCE only is promoted (the reader waits for that promotion, so SOURCE is
// read once per byte) or, when it cannot be promoted, read from SOURCE.
//
// With peers, a chunk homed on another node is promoted from its home (the
// Promoter's choice) and, when this node has no free room for a copy, the
// bytes the reader wants are fetched from the home without keeping them
// (forwarded); SOURCE only if the home fails. Both go through one
// ChunkSource, which makes that choice.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "tiering/base/counter_visitor.h"
#include "tiering/engine/chunk_source.h"
#include "tiering/engine/promoter.h"
#include "tiering/store/chunk_store.h"

namespace tierfs {

struct ReadCounters {
  std::atomic<uint64_t> tier_reads{0};    // pieces served from a tier
  std::atomic<uint64_t> source_reads{0};  // pieces served from SOURCE
  std::atomic<uint64_t> source_bytes{0};
  std::atomic<uint64_t> waits{0};          // reads that waited for an in-flight promotion
  std::atomic<uint64_t> early_reads{0};    // ...and got their bytes before it completed
  std::atomic<uint64_t> wait_timeouts{0};  // ...and gave up waiting: read SOURCE
  std::atomic<uint64_t> tier_errors{0};    // tier reads that failed (served from SOURCE)
  std::atomic<uint64_t> peer_reads{0};     // pieces fetched from a peer, not kept
  std::atomic<uint64_t> peer_bytes{0};
  std::atomic<uint64_t> bypass_kept{0};  // misses left on SOURCE: read from there already
  std::atomic<uint64_t> copy_reads{0};   // misses served from the reader's own copy
  // misses served from a tier once the promotion they started or waited
  // for had finished: bytes read from SOURCE for this read, not hits
  std::atomic<uint64_t> promoted_reads{0};
};

// Hears of every read (the order planner tracks the reader's position).
class ReadObserver {
 public:
  virtual ~ReadObserver() = default;
  // Called on the read path: must be cheap and never block on I/O.
  // `len` bytes were read at `off`; `hit`: every byte came from a tier
  // without waiting for a promotion.
  virtual void OnRead(NodeId id, uint64_t off, uint64_t len, bool hit) = 0;
};

class ReadPath {
 public:
  // Without a store and promoter (no tiers), every read goes to SOURCE. A
  // read waits for a promotion in flight at most `wait_limit`, then reads
  // SOURCE itself.
  ReadPath(const Namespace* ns, ChunkSource* source, ChunkStore* store, Promoter* promoter,
           std::chrono::milliseconds wait_limit = std::chrono::seconds(10));

  // Reads up to `size` bytes of regular file `id` at `off`. The bytes are at
  // out->data (in `scratch`, which must hold `size` bytes, or in tier memory
  // held by out->hold). Returns the count (short only at EOF) or -errno.
  ssize_t Read(NodeId id, uint64_t off, size_t size, char* scratch, TierRead* out);
  // The same from this node's tiers and SOURCE only, never from a peer, and
  // not seen by the observer: how a peer that asked this node is answered.
  // A wait for a promotion ends at `deadline` (the asker's) with -ETIMEDOUT.
  ssize_t ReadLocal(NodeId id, uint64_t off, size_t size, char* scratch, TierRead* out,
                    InFlight::Deadline deadline = InFlight::Deadline::max());

  // True if chunk `chunk` of file `id` is in a tier here or being promoted
  // (ReadLocal would not read SOURCE for it). Lock-free, no I/O.
  bool Holds(NodeId id, uint32_t chunk) const;
  // Keeps the `n` bytes at `data` as chunk `chunk` of file `id`, read from
  // SOURCE by a peer that offered it (Promoter::Adopt): 0, or -errno.
  int Adopt(NodeId id, uint32_t chunk, const char* data, size_t n);

  // The whole of regular file `id` is about to be read without passing
  // through here (a passthrough open: the kernel reads its tier file
  // itself): its chunks count as used now for eviction, and the observer
  // hears of a whole read from the tiers. Lock-free, no I/O.
  void NoteReadElsewhere(NodeId id);

  const ReadCounters& counters() const { return counters_; }
  // The "reads" group's figures.
  void VisitCounters(CounterVisitor& v) const;
  void SetObserver(ReadObserver* observer) { observer_.store(observer); }

 private:
  // *hit becomes false when a piece was not served from a tier at once.
  // Serving::kPeer: no peer is asked.
  ssize_t ReadRange(NodeId id, uint64_t off, size_t size, char* scratch, TierRead* out, bool* hit,
                    Serving serving, InFlight::Deadline asker = InFlight::Deadline::max());
  // Reads [off, off+n) of one chunk (off relative to the chunk): a few
  // looks at the chunk's state, each followed by the transition for that
  // state.
  ssize_t ReadChunk(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out, bool* hit,
                    Serving serving, InFlight::Deadline asker);
  // One read of a chunk across its looks, and what it has done so far.
  struct ChunkRead;
  // What a transition leads to: the read's answer, or another look.
  struct ChunkStep {
    bool answered = false;
    ssize_t result = 0;  // the count or -errno, once answered
  };
  ChunkStep ReadResident(ChunkRead& r, uint8_t state);
  ChunkStep AwaitPromotion(ChunkRead& r);
  ChunkStep PromoteOnMiss(ChunkRead& r);
  // A chunk that stays on SOURCE here: from its home if another node homes
  // it and a read serving `serving` may ask it, else (or if the home fails) from SOURCE.
  ssize_t ReadUncached(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out,
                       Serving serving);
  // From SOURCE itself, skipping the peers: for a file no tier takes, a
  // tier that failed, or a promotion that is stuck.
  ssize_t ReadSource(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out);
  void CountSource(ssize_t bytes);
  void PromoteRestOf(ChunkKey key);
  // The chunk of a file last read from SOURCE for want of room, in a small
  // direct-mapped table: a reader part-way through a chunk it reads from
  // SOURCE goes on doing so even when room frees up, for promoting it then
  // would read from SOURCE again the pieces it has already read.
  bool WasBypassed(ChunkKey key) const;
  void NoteBypassed(ChunkKey key);

  const Namespace* const ns_;
  ChunkSource* const chunk_source_;
  ChunkStore* const store_;
  Promoter* const promoter_;
  const std::chrono::milliseconds wait_limit_;
  ReadCounters counters_;
  std::atomic<ReadObserver*> observer_{nullptr};
  static constexpr size_t kBypassSlots = 1024;
  std::array<std::atomic<uint64_t>, kBypassSlots> bypassed_{};  // node+1 << 32 | chunk
};

}  // namespace tierfs
