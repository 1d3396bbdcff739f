// PeerClient: a peer that answers nothing while reads wait for it, on the
// progress thread: its stall (its fetches read SOURCE at once), the end
// of the stall when it answers again, and a connection made afresh when
// it stays silent while reads want it.
#include <algorithm>
#include <cerrno>

#include "tiering/base/log.h"
#include "tiering/peers/client/link_schedule.h"
#include "tiering/peers/client/peer_client.h"
#include "tiering/peers/client/peer_link.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

long long Ms(Clock::duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

}  // namespace

void PeerClient::Heard(Link& l) {
  l.last_heard = Clock::now();
  l.answered = true;
  l.redialing = false;
  EndStall(l);
}

void PeerClient::EndStall(Link& l) {
  if (!l.stalled) return;
  // It answers again: asked again at once.
  l.stalled = false;
  l.slow_until.store(0);
  l.slow_backoff = options_.retry_min;
  TIERFS_LOG(kDebug, "peer {} answers again", l.address.name);
}

bool PeerClient::Wanted(const Link& l, Clock::time_point now) {
  const auto at = Clock::time_point(Clock::duration(l.wanted_at.load(std::memory_order_relaxed)));
  return now - at < std::chrono::seconds(1);
}

// A peer with fetches waiting that has been heard from since the oldest
// was sent is working on them (a home promoting from a slow PFS still
// answers pings from its progress thread at once): they wait up to their
// deadline. One that answers nothing, not even a ping, for the stall time
// is stopped or cut off: its waiting fetches end now (their callers read
// SOURCE) and it is slow, skipped until it answers pings again. Not dead:
// its chunks keep their home, and dead_after still decides death.
void PeerClient::CheckStall(Link& l, Clock::time_point now) {
  Clock::time_point oldest = Clock::time_point::max();
  for (const auto& [id, p] : l.pending) {
    if (p->phase == Pending::kWaiting) oldest = std::min(oldest, p->sent_at);
  }
  if (oldest == Clock::time_point::max() || l.last_heard >= oldest) return;
  // The probe: a ping once the oldest fetch waited half the stall time
  // with nothing heard.
  const auto stall = l.liveness.StallTime();
  if (l.last_ping < oldest || l.last_ping <= l.last_heard) {
    if (now - oldest >= stall / 2) Ping(l);
    return;
  }
  if (now - l.last_ping < stall) return;
  l.counters.stalls++;
  MarkSlow(l, now);
  l.stalled = true;
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
// been silent for dead_after (Tick's down state). Logged at the stall.
void PeerClient::Redial(Link& l, Clock::time_point now) {
  l.counters.reconnects_after_silence++;
  TIERFS_LOG(kDebug, "peer {}: silent for {} ms while stalled: connecting afresh", l.address.name,
             Ms(now - l.last_heard));
  Forget(l, kDown, -ETIMEDOUT);
  l.redialing = true;
  l.retrying = true;
  l.dead = false;
  l.retry_at = now;
}

// A redialed peer's failed connects are not its death before it has been
// silent for dead_after, as they would not be on the connection it had.
bool PeerClient::SilentButNotDead(const Link& l, Clock::time_point now) const {
  return tierfs::SilentButNotDead(l.redialing, l.last_heard, options_.dead_after, now);
}

void PeerClient::MarkSlow(Link& l, Clock::time_point now) {
  l.slow_until.store((now + l.slow_backoff).time_since_epoch().count());
  l.slow_backoff = std::min(l.slow_backoff * 2, options_.retry_max);
}

size_t PeerClient::EndWaiting(Link& l, ssize_t error) {
  std::vector<std::shared_ptr<Pending>> ended;
  for (auto& [id, p] : l.pending) {
    if (p->phase == Pending::kWaiting) ended.push_back(p);
  }
  for (auto& p : ended) Complete(l, p, error);
  return ended.size();
}

// A ping's round trip, for the stall time (peer_liveness.h).
void PeerClient::OnPong(Link& l) {
  l.liveness.OnRoundTrip(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - l.last_ping));
}

}  // namespace tierfs
