// Promoter: copies chunks from SOURCE into tiers. A request claims the chunk
// from the ChunkStore (one promotion per chunk, its tier's bytes reserved)
// and queues the copy on the executor; the copy reads SOURCE in large
// sequential requests and streams into the claim, which publishes it. Every
// other outcome (a failure, a job dropped at shutdown, an exception) undoes
// the claim: nothing partial is visible and the chunk is served from SOURCE.
//
// The bytes come from a ChunkSource: with peers, a chunk another node homes
// is copied from that node instead (it reads SOURCE for the job), into free
// room only, never evicting this node's own chunks for it; a piece the home
// does not deliver is read from SOURCE, and so is the rest of that chunk.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/executor.h"
#include "tiering/base/mutex.h"
#include "tiering/engine/chunk_source.h"
#include "tiering/store/chunk_store.h"

namespace tierfs {

class Promoter {
 public:
  static constexpr size_t kReadSize = 1 << 20;  // one SOURCE request

  // Everything must outlive the promoter; the executor must be shut down
  // before the store is destroyed.
  Promoter(ChunkStore* store, ChunkSource* source, Executor* executor);

  // What a call asking for a promotion did: why, when it put nothing in
  // flight, so that a caller need not look at the catalog again to guess.
  enum class Outcome {
    kStarted,   // claimed: in flight (Request), or copied here (PromoteHere:
                // resident, or on SOURCE again if the copy failed)
    kServed,    // PromoteHere: the caller's range served from the copy,
                // the commit left to a pool thread (in flight)
    kBusy,      // resident or in flight already: another promotion has it
    kNoRoom,    // on SOURCE, and no tier has room for it now
    kLaneFull,  // on SOURCE, and the lane's queue is full
  };
  // The bytes come from where `serving` may take them (ChunkSource::HomeFor).

  // Starts promoting `key` if it is on SOURCE only. kStarted if this call
  // put it in flight (the caller may then wait on the store): the chunk is
  // claimed now; its copy waits its turn on `lane`.
  Outcome Request(ChunkKey key, Executor::Lane lane, Serving serving = Serving::kThisNode);

  // A reader needs `key`, which is in flight but whose copy has not started
  // (queued on the look-ahead or background lane, perhaps behind a whole
  // stage-in): the copy starts now, on this thread for a chunk of at most
  // kReadSize, else at the back of the queue for reads (it runs before any
  // read-ahead or background copy, after other reads' copies). True if this call
  // hurried it; false if it was not waiting in a queue.
  bool Hurry(ChunkKey key);

  // Promotes `key` on the calling thread, now: claims it and copies it
  // (a reader's miss on a small chunk: no hand-off to a pool thread, no
  // wait). kStarted if this call claimed it: it is resident when it
  // returns, or on SOURCE again if the copy failed.
  //
  // With `serve`, the caller wants [off, off+n) of the chunk: for a tier
  // whose commit waits for the device (Tier::slow_commit) and a chunk of one
  // SOURCE request, the range is copied to `scratch` from the bytes read
  // (kServed), and the commit runs on a pool thread: the chunk is then in
  // flight when this returns, resident soon after.
  struct Serve {
    uint64_t off = 0;
    size_t n = 0;
    char* scratch = nullptr;
  };
  Outcome PromoteHere(ChunkKey key, Serving serving = Serving::kThisNode, Serve* serve = nullptr);

  // Keeps `n` bytes a peer read from SOURCE and offered as chunk `key`
  // (this node is its home, as the peer saw it): claimed like a promotion
  // (evicting only if this node homes it), written, and committed: on the
  // calling thread, or on a pool thread for a tier whose commit waits for
  // the device (then the chunk is in flight when this returns). 0, or
  // -EEXIST (resident or in flight already), -ENOSPC (no room), -EINVAL
  // (not the chunk's length), or the tier's error.
  int Adopt(ChunkKey key, const char* data, size_t n);

  // True unless another live peer is `key`'s home (always true without peers).
  bool HomedHere(ChunkKey key) const { return chunk_source_->HomedHere(key); }
  // False while the job's peers are still connecting (homes not known yet).
  // Look-ahead for a chunk another node homes and this one has no room to
  // copy: asks the home (on the look-ahead lane) to promote it now. False
  // if the lane is full (not asked). Remembering what was asked is the
  // planner's.
  bool AskHome(ChunkKey key);

  uint64_t requested() const { return requested_.load(std::memory_order_relaxed); }
  uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }
  uint64_t inline_copies() const { return inline_.load(std::memory_order_relaxed); }
  uint64_t hurried() const { return hurried_.load(std::memory_order_relaxed); }
  uint64_t adopted() const { return adopted_.load(std::memory_order_relaxed); }
  // Its counters (requested, rejected, inline, adopted, hurried),
  // into the "promotions" group.
  void VisitCounters(CounterVisitor& v) const;

 private:
  // Claims `key` if it is on SOURCE only; *home: where to copy it from.
  // kStarted if claimed, else why not (kBusy, kNoRoom).
  Outcome ClaimFor(ChunkKey key, Serving serving, ChunkClaim* claim, HomeLink* home);
  void Copy(ChunkClaim& claim, HomeLink home);
  // Copy without the commit: the buffer holding the last piece read, or
  // null after failing the claim. A home that has no copy is offered the
  // one read here from SOURCE (ChunkSource::Route).
  const char* Fill(ChunkClaim& claim, HomeLink home);

  // A claimed chunk whose copy is queued: whoever takes it first (the
  // executor's job, or a reader through Hurry) copies it.
  struct Queued {
    ChunkClaim claim;
    HomeLink home = HomeLink::Source();
    std::atomic<bool> taken{false};
  };
  void Run(Queued& q);
  // The queued copies a reader may hurry, by chunk (look-ahead and
  // background lanes only); weak: a job dropped unrun still undoes its claim.
  struct QueuedStripe {
    Mutex mu;  // guards map; a leaf
    std::unordered_map<ChunkKey, std::weak_ptr<Queued>, ChunkKeyHash> map GUARDED_BY(mu);
  };
  static constexpr size_t kQueuedStripes = 16;
  QueuedStripe& StripeOf(ChunkKey key) { return queued_[ChunkKeyHash{}(key) % kQueuedStripes]; }
  void Forget(ChunkKey key);
  std::array<QueuedStripe, kQueuedStripes> queued_;

  ChunkStore* const store_;
  ChunkSource* const chunk_source_;
  Executor* const executor_;
  std::atomic<uint64_t> requested_{0};  // chunks put in flight
  std::atomic<uint64_t> rejected_{0};   // the executor's lane was full
  std::atomic<uint64_t> inline_{0};     // chunks copied by PromoteHere
  std::atomic<uint64_t> hurried_{0};    // queued copies a reader started at once
  std::atomic<uint64_t> adopted_{0};    // chunks peers offered, kept
};

}  // namespace tierfs
