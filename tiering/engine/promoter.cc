#include "tiering/engine/promoter.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include "tiering/base/aligned_buffer.h"

namespace tierfs {

Promoter::Promoter(ChunkStore* store, ChunkSource* source, Executor* executor)
    : store_(store), chunk_source_(source), executor_(executor) {}

Promoter::Outcome Promoter::Request(ChunkKey key, Executor::Lane lane, Serving serving) {
  // A full lane would reject the job after the claim made room for it:
  // look first, so that no chunk is evicted for a promotion never made.
  if (executor_->queued(lane) >= executor_->capacity()) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    // Another promotion may have it already: the caller may wait for that.
    return store_->state(key) == Catalog::kOnSource ? Outcome::kLaneFull : Outcome::kBusy;
  }
  auto q = std::make_shared<Queued>();
  if (Outcome claimed = ClaimFor(key, serving, &q->claim, &q->home); claimed != Outcome::kStarted) {
    return claimed;
  }
  const bool may_hurry = lane != Executor::Lane::kForeground;
  if (may_hurry) {
    QueuedStripe& stripe = StripeOf(key);
    MutexLock lock(stripe.mu);
    stripe.map[key] = q;
  }
  // A job dropped unrun (lane full, shutdown) destroys the claim, undoing it.
  if (!executor_->Submit(lane, Executor::Job{[this, q] { Run(*q); }})) {
    if (may_hurry) Forget(key);
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return Outcome::kLaneFull;
  }
  requested_.fetch_add(1, std::memory_order_relaxed);
  return Outcome::kStarted;
}

void Promoter::Run(Queued& q) {
  if (q.taken.exchange(true)) return;  // a reader hurried it
  Forget(q.claim.key());
  Copy(q.claim, q.home);
}

void Promoter::Forget(ChunkKey key) {
  QueuedStripe& stripe = StripeOf(key);
  MutexLock lock(stripe.mu);
  stripe.map.erase(key);
}

bool Promoter::Hurry(ChunkKey key) {
  std::shared_ptr<Queued> q;
  {
    QueuedStripe& stripe = StripeOf(key);
    MutexLock lock(stripe.mu);
    auto it = stripe.map.find(key);
    if (it == stripe.map.end()) return false;
    q = it->second.lock();
    stripe.map.erase(it);
  }
  if (!q || q->taken.exchange(true)) return false;  // dropped, or its job has started
  hurried_.fetch_add(1, std::memory_order_relaxed);
  // A large chunk joins the queue for reads (ahead of every read-ahead and
  // background copy, behind other reads' copies); the reader takes its
  // range early, as from any copy in flight. If that queue is full, or the
  // chunk is small, this thread copies it.
  if (q->claim.length() > kReadSize &&
      executor_->Submit(Executor::Lane::kForeground,
                        Executor::Job{[this, q] { Copy(q->claim, q->home); }})) {
    return true;
  }
  Copy(q->claim, q->home);
  return true;
}

Promoter::Outcome Promoter::ClaimFor(ChunkKey key, Serving serving, ChunkClaim* claim,
                                     HomeLink* home) {
  // Cheap before the claim: a chunk resident or in flight needs no home.
  if (store_->state(key) != Catalog::kOnSource) return Outcome::kBusy;
  *home = chunk_source_->HomeFor(key, serving);
  switch (store_->Claim(key, claim, home->is_source() ? ClaimOwner::kOwn : ClaimOwner::kPeerCopy)) {
    case ChunkStore::ClaimResult::kClaimed:
      return Outcome::kStarted;
    case ChunkStore::ClaimResult::kBusy:
      return Outcome::kBusy;
    case ChunkStore::ClaimResult::kNoRoom:
      break;
  }
  return Outcome::kNoRoom;
}

Promoter::Outcome Promoter::PromoteHere(ChunkKey key, Serving serving, Serve* serve) {
  ChunkClaim claim;
  HomeLink home = HomeLink::Source();
  if (Outcome claimed = ClaimFor(key, serving, &claim, &home); claimed != Outcome::kStarted) {
    return claimed;
  }
  requested_.fetch_add(1, std::memory_order_relaxed);
  inline_.fetch_add(1, std::memory_order_relaxed);
  // A tier whose commit waits for the device (a directory tier's fdatasync
  // and rename): the reader takes its range from the copy, and a pool
  // thread commits. Only a chunk of one piece: the buffer then holds all of it.
  const bool slow = store_->tiers()[static_cast<size_t>(claim.tier())]->slow_commit();
  if (serve == nullptr || !slow || claim.length() > kReadSize ||
      serve->off + serve->n > claim.length()) {
    Copy(claim, home);
    return Outcome::kStarted;
  }
  const char* bytes = Fill(claim, home);
  if (bytes == nullptr) return Outcome::kStarted;  // failed: on SOURCE again
  std::memcpy(serve->scratch, bytes + serve->off, serve->n);
  auto held = std::make_shared<ChunkClaim>(std::move(claim));
  // A job dropped unrun (shutdown) undoes the claim; a full lane: commit here.
  if (!executor_->Submit(Executor::Lane::kForeground, Executor::Job{[held] { held->Publish(); }})) {
    held->Publish();
  }
  return Outcome::kServed;
}

bool Promoter::AskHome(ChunkKey key) {
  if (!chunk_source_->has_peers()) return true;
  return executor_->Submit(Executor::Lane::kLookahead,
                           Executor::Job{[this, key] { chunk_source_->AskHome(key); }});
}

void Promoter::Copy(ChunkClaim& claim, HomeLink home) {
  if (Fill(claim, home) != nullptr) claim.Publish();  // a failed commit undoes the claim itself
}

const char* Promoter::Fill(ChunkClaim& claim, HomeLink home) {
  thread_local AlignedBuffer aligned;
  char* buf;
  try {
    buf = aligned.Get(kReadSize);
  } catch (const std::bad_alloc&) {
    claim.Fail(-ENOMEM, "no memory for the copy buffer");
    return nullptr;
  }
  ChunkSource::Route route{home, claim.length()};
  // A chunk of several pieces read here for a home that has none is kept
  // whole for the offer (a chunk of one piece is offered from `buf`),
  // within the bytes ChunkSource lets all promotions hold for offers.
  ChunkSource::OfferBuffer whole;
  for (uint64_t done = 0; done < claim.length();) {
    const char* why = nullptr;
    int err = 0;
    size_t want = static_cast<size_t>(std::min<uint64_t>(kReadSize, claim.length() - done));
    if (executor_->stopping()) {
      err = -ECANCELED, why = "cancelled at shutdown";
    } else if (ssize_t n = chunk_source_->ReadForCopy(claim.key(), done, want, buf, &route);
               n < 0) {
      err = static_cast<int>(n), why = "SOURCE read failed";
    } else if (static_cast<size_t>(n) != want) {
      err = -EIO, why = "SOURCE read short";
    } else if (err = claim.Write(buf, want); err < 0) {
      why = "tier write failed";
    }
    if (why != nullptr) {
      claim.Fail(err, why);
      return nullptr;
    }
    if (!route.offer_to.is_source() && claim.length() > kReadSize) {
      if (done == 0) whole = chunk_source_->TakeOfferBuffer(claim.length());
      if (whole.data() != nullptr) std::memcpy(whole.data() + done, buf, want);
    }
    done += want;
  }
  if (!route.offer_to.is_source()) {
    const char* bytes = claim.length() <= kReadSize ? buf : whole.data();
    if (bytes != nullptr) chunk_source_->Offer(claim.key(), bytes, claim.length(), route.offer_to);
  }
  return buf;
}

int Promoter::Adopt(ChunkKey key, const char* data, size_t n) {
  if (store_->state(key) != Catalog::kOnSource) return -EEXIST;
  ChunkClaim claim;
  if (store_->Claim(key, &claim,
                    chunk_source_->HomedHere(key) ? ClaimOwner::kOwn : ClaimOwner::kPeerCopy) !=
      ChunkStore::ClaimResult::kClaimed) {
    return store_->state(key) != Catalog::kOnSource ? -EEXIST : -ENOSPC;
  }
  if (claim.length() != n) {
    claim.Fail(-EINVAL, "a peer offered a chunk of another length");
    return -EINVAL;
  }
  for (size_t done = 0; done < n;) {
    size_t want = std::min(kReadSize, n - done);
    if (int err = claim.Write(data + done, want); err < 0) {
      claim.Fail(err, "tier write failed");
      return err;
    }
    done += want;
  }
  // A commit that waits for the device (a directory tier) runs on a pool
  // thread, as a reader's miss does; a job dropped unrun undoes the claim.
  // Counted as kept once committed here, or handed to the pool.
  if (store_->tiers()[static_cast<size_t>(claim.tier())]->slow_commit()) {
    auto held = std::make_shared<ChunkClaim>(std::move(claim));
    if (executor_->Submit(Executor::Lane::kForeground,
                          Executor::Job{[held] { held->Publish(); }})) {
      adopted_.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
    claim = std::move(*held);
  }
  int err = claim.Publish();
  if (err == 0) adopted_.fetch_add(1, std::memory_order_relaxed);
  return err;
}

void Promoter::VisitCounters(CounterVisitor& v) const {
  v.Counter("requested", requested(), {"Chunk promotions put in flight."});
  v.Counter("rejected", rejected(),
            {"Chunk promotions refused because the queue of their kind (for reads, read ahead, "
             "background) was full."});
  v.Counter("inline", inline_copies(),
            {"Chunk promotions copied by the reader's own thread (small chunks it missed)."});
  v.Counter("adopted", adopted(),
            {"Chunks another node read from SOURCE and offered to this node, the node that keeps "
             "them, and kept."});
  v.Counter("hurried", hurried(),
            {"Queued chunk promotions a reader needed: started at once, not after the queue."});
}

}  // namespace tierfs
