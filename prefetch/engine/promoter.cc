#include "prefetch/engine/promoter.h"

#include <cerrno>
#include <memory>

#include "tiering/base/aligned_buffer.h"

namespace tierfs {

Promoter::Promoter(ChunkStore* store, ChunkSource* source, Executor* executor)
    : store_(store), source_(source), executor_(executor) {}

bool Promoter::Request(ChunkKey key, Executor::Lane lane, From from) {
  // A full lane would reject the job after the claim made room for it:
  // look first, so that no chunk is evicted for a promotion never made.
  if (executor_->queued(lane) >= executor_->capacity()) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  auto q = std::make_shared<Queued>();
  if (!ClaimFor(key, from, &q->claim, &q->home)) return false;
  const bool may_hurry = lane != Executor::Lane::kForeground;
  if (may_hurry) {
    QueuedStripe& stripe = StripeOf(key);
    std::lock_guard lock(stripe.mu);
    stripe.map[key] = q;
  }
  // A job dropped unrun (lane full, shutdown) destroys the claim, undoing it.
  if (!executor_->Submit(lane, Executor::Job{[this, q] { Run(*q); }})) {
    if (may_hurry) Forget(key);
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  requested_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Promoter::Run(Queued& q) {
  if (q.taken.exchange(true)) return;  // a reader hurried it
  Forget(q.claim.key());
  Copy(q.claim, q.home);
}

void Promoter::Forget(ChunkKey key) {
  QueuedStripe& stripe = StripeOf(key);
  std::lock_guard lock(stripe.mu);
  stripe.map.erase(key);
}

bool Promoter::Hurry(ChunkKey key) {
  std::shared_ptr<Queued> q;
  {
    QueuedStripe& stripe = StripeOf(key);
    std::lock_guard lock(stripe.mu);
    auto it = stripe.map.find(key);
    if (it == stripe.map.end()) return false;
    q = it->second.lock();
    stripe.map.erase(it);
  }
  if (!q || q->taken.exchange(true)) return false;  // dropped, or its job has started
  hurried_.fetch_add(1, std::memory_order_relaxed);
  // A large chunk goes ahead of everything queued; the reader takes its
  // range early, as from any copy in flight. If even that lane is full, or
  // the chunk is small, this thread copies it.
  if (q->claim.length() > kReadSize &&
      executor_->Submit(Executor::Lane::kForeground,
                        Executor::Job{[this, q] { Copy(q->claim, q->home); }})) {
    return true;
  }
  Copy(q->claim, q->home);
  return true;
}

bool Promoter::ClaimFor(ChunkKey key, From from, ChunkClaim* claim, int* home) {
  // Cheap before the claim: a chunk resident or in flight needs no home.
  if (store_->state(key) != Catalog::kOnSource) return false;
  *home = from == From::kHome ? source_->Home(key) : ChunkSource::kSource;
  // A copy of a chunk homed elsewhere takes free room only.
  return store_->Claim(key, claim, /*may_evict=*/*home == ChunkSource::kSource) ==
         ChunkStore::ClaimResult::kClaimed;
}

bool Promoter::PromoteHere(ChunkKey key, From from) {
  ChunkClaim claim;
  int home;
  if (!ClaimFor(key, from, &claim, &home)) return false;
  requested_.fetch_add(1, std::memory_order_relaxed);
  inline_.fetch_add(1, std::memory_order_relaxed);
  Copy(claim, home);
  return true;
}

bool Promoter::AskHome(ChunkKey key) {
  if (!source_->has_peers()) return true;
  return executor_->Submit(Executor::Lane::kLookahead,
                           Executor::Job{[this, key] { source_->AskHome(key); }});
}

void Promoter::Copy(ChunkClaim& claim, int home) {
  thread_local AlignedBuffer aligned;
  char* buf;
  try {
    buf = aligned.Get(kReadSize);
  } catch (const std::bad_alloc&) {
    return claim.Fail(-ENOMEM, "no memory for the copy buffer");
  }
  for (uint64_t done = 0; done < claim.length();) {
    if (executor_->stopping()) return claim.Fail(-ECANCELED, "cancelled at shutdown");
    size_t want = static_cast<size_t>(std::min<uint64_t>(kReadSize, claim.length() - done));
    ssize_t n = source_->Read(claim.key(), done, want, buf, &home);
    if (n < 0) return claim.Fail(static_cast<int>(n), "SOURCE read failed");
    if (static_cast<size_t>(n) != want) return claim.Fail(-EIO, "SOURCE read short");
    if (int err = claim.Write(buf, want); err < 0) return claim.Fail(err, "tier write failed");
    done += want;
  }
  claim.Publish();  // a failed commit undoes the claim itself
}

void Promoter::VisitCounters(CounterVisitor& v) const {
  v.Counter("requested", requested(), {"Chunk promotions put in flight."});
  v.Counter("rejected", rejected(),
            {"Chunk promotions refused because the executor's lane was full."});
  v.Counter("inline", inline_copies(),
            {"Chunk promotions copied by the reader's own thread (small chunks it missed)."});
  v.Counter("hurried", hurried(),
            {"Queued chunk promotions a reader needed: started at once, not after the queue."});
}

}  // namespace tierfs
