// PeerConnections: whether a peer answers, on the progress thread: heard
// from, slow (a Fetch timed out), stalled (it answers nothing, not even a
// ping, while fetches wait: they read SOURCE at once), the end of a stall
// when it answers again, and a connection made afresh when it stays silent
// while reads want it.
#include <algorithm>
#include <cerrno>

#include "tiering/base/log.h"
#include "tiering/peers/client/peer_connections.h"

namespace tierfs {

using std::chrono::milliseconds;

void PeerConnections::Heard(PeerLink& l) {
  l.progress.last_heard = now_();
  l.progress.answered = true;
  l.progress.redialing = false;
  EndStall(l);
}

void PeerConnections::EndStall(PeerLink& l) {
  if (!l.progress.stalled) return;
  // It answers again: asked again at once.
  l.progress.stalled = false;
  l.status.slow_until.store(0);
  l.progress.slow_backoff = options_.retry_min;
  TIERFS_LOG(kDebug, "peer {} answers again", l.address.name);
}

void PeerConnections::Answering(PeerLink& l) {
  l.progress.backoff = options_.retry_min;
  l.progress.slow_backoff = options_.retry_min;
}

// The peer did not answer in time: slow, at once, so no other caller waits
// for it for a while; not dead (its chunks keep their home): it is pinged,
// and is dead only if it stays silent for dead_after.
void PeerConnections::TimedOut(PeerLink& l, uint64_t generation) {
  if (generation != l.progress.generation || l.status.state.load() != LinkState::kUp) return;
  const auto now = now_();
  MarkSlow(l, now);
  if (now - l.progress.last_ping >= milliseconds(10)) Ping(l);
  const uint64_t n = l.counters.timeouts.load();
  if (LogSampled(n)) {
    TIERFS_LOG(kWarning, "peer {} did not answer in time: its chunks are read here for {} ms",
               l.address.name, Ms(l.progress.slow_backoff / 2));
  }
}

bool PeerConnections::Wanted(const PeerLink& l, Clock::time_point now) {
  const auto at =
      Clock::time_point(Clock::duration(l.status.wanted_at.load(std::memory_order_relaxed)));
  return now - at < std::chrono::seconds(1);
}

// A peer with fetches waiting that has been heard from since the oldest
// was sent is working on them (a home promoting from a slow PFS still
// answers pings from its progress thread at once): they wait up to their
// deadline. One that answers nothing, not even a ping, for the stall time
// is stopped or cut off: its waiting fetches end now (their callers read
// SOURCE) and it is slow, skipped until it answers pings again. Not dead:
// its chunks keep their home, and dead_after still decides death.
void PeerConnections::CheckStall(PeerLink& l, Clock::time_point now) {
  LinkProgress& c = l.progress;
  Clock::time_point oldest = Clock::time_point::max();
  for (const auto& [id, p] : c.pending) {
    if (p->phase == PeerRequest::kWaiting) oldest = std::min(oldest, p->sent_at);
  }
  if (oldest == Clock::time_point::max() || c.last_heard >= oldest) return;
  // The probe: a ping once the oldest fetch waited half the stall time
  // with nothing heard.
  const auto stall = c.liveness.StallTime();
  if (c.last_ping < oldest || c.last_ping <= c.last_heard) {
    if (now - oldest >= stall / 2) Ping(l);
    return;
  }
  if (now - c.last_ping < stall) return;
  l.counters.stalls++;
  MarkSlow(l, now);
  c.stalled = true;
  const size_t ended = EndWaiting(l, -ETIMEDOUT);
  const uint64_t n = l.counters.stalls.load();
  if (LogSampled(n)) {
    TIERFS_LOG(kWarning,
               "peer {} answered nothing for {} ms, not even a ping: {} fetches read here, and "
               "its chunks read here until it answers",
               l.address.name, Ms(now - oldest), ended);
  }
}

// Stalled, wanted, and silent for its silence bound (since its last
// answer, and since this connection came up): the connection is
// dropped (its requests end -ETIMEDOUT: their callers read SOURCE) and
// made again at the next tick, then every `probe` while reads want it,
// each attempt a fresh TCP connect bounded by probe_connect and resumed
// by its ticket. Not a death: its chunks keep their home until it has
// been silent for dead_after (TickDown). Logged at the stall.
void PeerConnections::Redial(PeerLink& l, Clock::time_point now) {
  l.counters.reconnects_after_silence++;
  TIERFS_LOG(kDebug, "peer {}: silent for {} ms while stalled: connecting afresh", l.address.name,
             Ms(now - l.progress.last_heard));
  Forget(l, LinkState::kDown, -ETIMEDOUT);
  l.progress.redialing = true;
  l.status.retrying = true;
  l.status.dead = false;
  l.progress.retry_at = now;
}

// A redialed peer's failed connects are not its death before it has been
// silent for dead_after, as they would not be on the connection it had.
bool PeerConnections::SilentButNotDead(const PeerLink& l, Clock::time_point now) const {
  return tierfs::SilentButNotDead(l.progress.redialing, l.progress.last_heard, options_.dead_after,
                                  now);
}

void PeerConnections::MarkSlow(PeerLink& l, Clock::time_point now) {
  l.status.slow_until.store((now + l.progress.slow_backoff).time_since_epoch().count());
  l.progress.slow_backoff = std::min(l.progress.slow_backoff * 2, options_.retry_max);
}

size_t PeerConnections::EndWaiting(PeerLink& l, ssize_t error) {
  std::vector<std::shared_ptr<PeerRequest>> ended;
  for (auto& [id, p] : l.progress.pending) {
    if (p->phase == PeerRequest::kWaiting) ended.push_back(p);
  }
  for (auto& p : ended) Complete(l, p, error);
  return ended.size();
}

void PeerConnections::EndAbandoned(PeerLink& l, Clock::time_point now) {
  std::vector<std::shared_ptr<PeerRequest>> ended;
  for (auto& [id, p] : l.progress.pending) {
    if (now < p->deadline) continue;
    MutexLock lock(p->mu);
    if (p->abandoned && p->phase == PeerRequest::kWaiting) ended.push_back(p);
  }
  for (auto& p : ended) Complete(l, p, -ETIMEDOUT);
}

// A ping's round trip, for the stall time (peer_liveness.h).
void PeerConnections::OnPong(PeerLink& l) {
  l.progress.liveness.OnRoundTrip(
      std::chrono::duration_cast<std::chrono::microseconds>(now_() - l.progress.last_ping));
}

}  // namespace tierfs
