// PeerClient's hedge: a Fetch whose peer has not begun to answer within
// the peer's hedge time reads SOURCE too (Race), the hedge time learnt
// from the peer's answers (Answered), and the requests hedges leave
// behind ended at their deadline (EndAbandoned). The asking is
// peer_client.cc's, the connections peer_connections.cc's.
#include <algorithm>
#include <cerrno>
#include <vector>

#include "tiering/peers/client/peer_client.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// The race: the peer has its hedge time to begin answering (the bytes
// arriving, or an error); then SOURCE is read into `dest` on this thread
// while the request stays with the progress thread. Whatever the peer
// sends then lands in the request's own buffer and is dropped with it
// (never in `dest`, which only this thread writes). Both racers are
// bounded: the request by its deadline (EndAbandoned), SOURCE's read by
// the read path's own bounds. If SOURCE fails, the peer is waited for
// as if there were no hedge.
bool PeerClient::Race(PeerLink& l, const std::shared_ptr<PeerRequest>& p, char* dest, Hedge* hedge,
                      ssize_t* result) {
  const auto race_at = std::min(p->deadline, Clock::now() + hedge_after(l.index));
  {
    MutexLock lock(p->mu);
    if (p->cv.WaitUntil(p->mu, race_at, [&] { return p->phase != PeerRequest::kWaiting; }))
      return false;  // it answers (or its bytes are on their way): no race
  }
  if (Clock::now() >= p->deadline) return false;
  l.counters.hedges++;
  const ssize_t got = hedge->read(dest);
  if (got < 0) return false;
  bool peer_first = false;
  {
    MutexLock lock(p->mu);
    peer_first = p->phase != PeerRequest::kWaiting;
    p->abandoned = true;
  }
  (peer_first ? l.counters.hedges_lost : l.counters.hedges_won)++;
  l.counters.hedge_bytes += static_cast<uint64_t>(got);
  hedge->used = true;
  *result = got;
  return true;
}

std::chrono::microseconds PeerClient::hedge_after(size_t peer) const {
  return connections_.link(peer).hedge_time.after();
}

void PeerClient::Want(size_t peer) {
  if (peer < connections_.size()) {
    connections_.link(peer).status.wanted_at.store(Clock::now().time_since_epoch().count(),
                                                   std::memory_order_relaxed);
  }
}

// The latency of an answer, from the request sent to its first byte back
// (hedge_time.h: the hedge time is its p99 within bounds).
void PeerClient::Answered(PeerLink& l, const PeerRequest& p) {
  l.hedge_time.Record(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - p.sent_at));
}

}  // namespace tierfs
