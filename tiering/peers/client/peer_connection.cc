#include "tiering/peers/client/peer_connection.h"

#include <algorithm>
#include <cerrno>
#include <vector>

#include "tiering/base/log.h"

namespace tierfs {

using std::chrono::milliseconds;

PeerConnection::PeerConnection(size_t index, const PeerClientOptions& options,
                               ConnectionTable* table)
    : options_(options), table_(*table), link_(index, options) {}

// --- Its step at a tick ---

void PeerConnection::TickDown(Clock::time_point now, bool grace_over) {
  LinkProgress& c = link_.progress;
  const DownStep step =
      NextDownStep(DownClocks(now), options_.dead_after, options_.probe, grace_over, now);
  if (step.death == DownStep::kSilent) {
    link_.status.dead = true;
    c.redialing = false;  // its next connection is heard when made
    link_.counters.downs++;
    TIERFS_LOG(kWarning,
               "peer {} is down (its chunks are kept by others meanwhile): silent for {} ms",
               link_.address.name, Ms(now - c.last_heard));
  } else if (step.death == DownStep::kNeverUp) {
    link_.status.dead = true;
    TIERFS_LOG(kWarning, "peer {} has not come up in {} s: its chunks are kept by others",
               link_.address.name, Ms(options_.grace) / 1000);
  }
  if (step.dial == DownStep::kProbe) link_.counters.probes++;
  if (step.dial != DownStep::kWait) table_.Connect(*this);
}

void PeerConnection::TickUp(Clock::time_point now) {
  LinkProgress& c = link_.progress;
  // A ping when nothing came for a heartbeat: a quarter of dead_after, at most 1 s.
  const auto heartbeat = Heartbeat(options_.dead_after);
  const UpLinkTimers timers{options_.idle_close, options_.dead_after, options_.probe, heartbeat};
  const UpStep step = NextUpStep(UpClocks(now), timers, now);
  switch (step) {
    case UpStep::kClose:
      Close();
      break;
    case UpStep::kDown:
      Down("silent for " + std::to_string(Ms(now - c.last_heard)) + " ms", /*dead=*/true);
      break;
    case UpStep::kRedial:
      Redial(now);  // down: made afresh at the next tick
      return;
    case UpStep::kPing:
      Ping();
      break;
    case UpStep::kProbe:  // its first answer ends the stall
      link_.counters.probes++;
      Ping();
      break;
    case UpStep::kCheckStall:
      CheckStall(now);
      break;
  }
  EndAbandoned(now);
  // Slow, and has not answered a ping since: stays slow.
  if (auto until = SlowExtended(UpClocks(now), heartbeat, now)) {
    link_.status.slow_until.store(until->time_since_epoch().count());
  }
}

DownLinkClocks PeerConnection::DownClocks(Clock::time_point now) const {
  const LinkProgress& p = link_.progress;
  DownLinkClocks c;
  c.dead = link_.status.dead.load();
  c.redialing = p.redialing;
  c.ever_up = p.ever_up;
  c.left = p.left;
  c.wanted = Wanted(now);
  c.last_heard = p.last_heard;
  c.retry_at = p.retry_at;
  c.last_attempt = p.last_attempt;
  return c;
}

UpLinkClocks PeerConnection::UpClocks(Clock::time_point now) const {
  const auto at = [](int64_t ns) { return Clock::time_point(Clock::duration(ns)); };
  const LinkProgress& p = link_.progress;
  UpLinkClocks c;
  // No request waits for an answer, and no Fetch holds a slot (one that
  // has its answer and is opening it has not marked the link used yet).
  c.idle = p.pending.empty() && link_.slots.in_flight() == 0;
  c.last_used = at(link_.status.last_used.load());
  c.last_heard = p.last_heard;
  c.last_ping = p.last_ping;
  c.connected_at = p.connected_at;
  c.slow_until = at(link_.status.slow_until.load());
  c.stalled = p.stalled;
  c.wanted = Wanted(now);
  c.silence_bound = p.liveness.SilenceBound();
  return c;
}

void PeerConnection::Ping() {
  LinkProgress& c = link_.progress;
  WireHeader h;
  c.ping_id = table_.NextRequestId();
  size_t n =
      EncodeBare(MsgType::kPing, WireIds{c.ping_id, c.crypto->session, c.crypto->next_seq++}, &h);
  c.last_ping = table_.Time();
  if (!SealWire(c.crypto->keys.send, &h, n, nullptr, 0, nullptr)) return;
  transport()->Send(c.ep, h, n, nullptr, 0, PeerTransport::kReply, [](bool) {});
}

// --- Its ways down, and the requests they end ---

// Forgets the connection's endpoint and keys, and ends its requests that
// are not receiving (a receive ends when the transport purges the closed
// endpoint).
LinkState PeerConnection::Forget(LinkState next, ssize_t error) {
  LinkProgress& c = link_.progress;
  const LinkState was = link_.status.state.load();
  if (c.ep != nullptr) {
    table_.Unlist(c.ep);
    transport()->Close(c.ep);  // ends its sends and receives
    c.ep = nullptr;
  }
  if (c.crypto) {
    table_.UnlistSession(c.crypto->session);
    c.crypto.reset();
  }
  if (was == LinkState::kUp || was == LinkState::kConnecting) table_.Closed();
  link_.status.state = next;
  ++c.generation;
  EndWaiting(error);
  Signal();
  return was;
}

void PeerConnection::Close() {
  if (link_.status.state.load() != LinkState::kUp) return;
  LinkProgress& c = link_.progress;
  WireHeader h;
  size_t n = EncodeBare(MsgType::kBye, WireIds{0, c.crypto->session, c.crypto->next_seq++}, &h);
  if (SealWire(c.crypto->keys.send, &h, n, nullptr, 0, nullptr)) {
    // The endpoint closes once the kBye is out (a forced close could drop it).
    PeerEndpoint ep = c.ep;
    table_.Unlist(ep);
    c.ep = nullptr;
    transport()->Send(ep, h, n, nullptr, 0, 0, [this, ep](bool) { transport()->Close(ep); });
  }
  link_.counters.closed_idle++;
  Forget(LinkState::kIdle);
  TIERFS_LOG(kDebug, "peer {}: connection closed, unused", link_.address.name);
}

void PeerConnection::Down(const std::string& why, bool dead) {
  LinkProgress& c = link_.progress;
  const LinkState was = Forget(LinkState::kDown);
  link_.status.retrying = true;
  link_.status.dead = dead;
  // Taken for gone: its next connection is heard when made (else, made
  // after dead_after of silence, it would be down again before its first
  // answer could come).
  if (dead) c.redialing = false;
  c.retry_at = table_.Time() + c.backoff;
  c.backoff = std::min(c.backoff * 2, options_.retry_max);
  if (table_.stopped()) {
    // shutting down: nothing to say
  } else if (was == LinkState::kUp) {
    link_.counters.downs++;
    TIERFS_LOG(kWarning, "peer {} is down{}: {}; retrying in {} ms", link_.address.name,
               dead ? " (its chunks are kept by others meanwhile)" : "", why,
               Ms(c.retry_at - table_.Time()));
  } else if (was == LinkState::kConnecting) {
    link_.counters.connect_failures++;
    TIERFS_LOG(kDebug, "peer {}: no connection: {}", link_.address.name, why);
  }
}

// Its server is stopping: no warning, no transport error to wait for.
// Gone (its chunks go elsewhere), retried only at the longest backoff, in
// case its node mounts again within the job.
void PeerConnection::Leaving() {
  LinkProgress& c = link_.progress;
  Forget(LinkState::kDown, -ECONNRESET);
  c.left = true;
  link_.status.dead = true;
  c.redialing = false;
  link_.status.retrying = true;
  c.backoff = options_.retry_max;
  c.retry_at = table_.Time() + options_.retry_max;
  // Counted last: whoever sees it counted sees the link down and dead.
  link_.counters.left++;
  TIERFS_LOG(kDebug, "peer {} is leaving the job", link_.address.name);
}

// The peer dropped this session (it heard nothing from us for long):
// connect again now; the Fetches it ends ask again on the new one. Not
// dead: its chunks keep their home. Told so on a keep-alive, nothing is
// waiting: idle until next needed (two nodes competing for a full
// server's last slot must not take it from each other at every heartbeat).
void PeerConnection::Forgotten() {
  link_.counters.resets++;
  const bool wanted = !link_.progress.pending.empty();
  Forget(LinkState::kIdle, -ECONNRESET);  // its Fetches ask again once it is up
  TIERFS_LOG(kInfo, "peer {} had forgotten this node's connection{}", link_.address.name,
             wanted ? ": connecting again" : "");
  if (wanted) table_.Connect(*this);
}

void PeerConnection::Complete(const std::shared_ptr<PeerRequest>& p, ssize_t result) {
  {
    MutexLock lock(p->mu);
    if (p->phase == PeerRequest::kDone) return;
    p->phase = PeerRequest::kDone;
    p->result = result;
  }
  p->cv.NotifyAll();
  link_.progress.pending.erase(p->id);
}

size_t PeerConnection::EndWaiting(ssize_t error) {
  std::vector<std::shared_ptr<PeerRequest>> ended;
  for (auto& [id, p] : link_.progress.pending) {
    if (p->phase == PeerRequest::kWaiting) ended.push_back(p);
  }
  for (auto& p : ended) Complete(p, error);
  return ended.size();
}

void PeerConnection::EndAbandoned(Clock::time_point now) {
  std::vector<std::shared_ptr<PeerRequest>> ended;
  for (auto& [id, p] : link_.progress.pending) {
    if (now < p->deadline) continue;
    MutexLock lock(p->mu);
    if (p->abandoned && p->phase == PeerRequest::kWaiting) ended.push_back(p);
  }
  for (auto& p : ended) Complete(p, -ETIMEDOUT);
}

// --- Whether it answers: heard, slow, stalled, made afresh ---

void PeerConnection::Heard() {
  link_.progress.last_heard = table_.Time();
  link_.progress.answered = true;
  link_.progress.redialing = false;
  EndStall();
}

void PeerConnection::EndStall() {
  if (!link_.progress.stalled) return;
  // It answers again: asked again at once.
  link_.progress.stalled = false;
  link_.status.slow_until.store(0);
  link_.progress.slow_backoff = options_.retry_min;
  TIERFS_LOG(kDebug, "peer {} answers again", link_.address.name);
}

// A ping's round trip, for the stall time (peer_liveness.h).
void PeerConnection::OnPong() {
  link_.progress.liveness.OnRoundTrip(std::chrono::duration_cast<std::chrono::microseconds>(
      table_.Time() - link_.progress.last_ping));
}

void PeerConnection::Answering() {
  link_.progress.backoff = options_.retry_min;
  link_.progress.slow_backoff = options_.retry_min;
}

// The peer did not answer in time: slow, at once, so no other caller waits
// for it for a while; not dead (its chunks keep their home): it is pinged,
// and is dead only if it stays silent for dead_after.
void PeerConnection::TimedOut(uint64_t generation) {
  if (generation != link_.progress.generation || link_.status.state.load() != LinkState::kUp) {
    return;
  }
  const auto now = table_.Time();
  MarkSlow(now);
  if (now - link_.progress.last_ping >= milliseconds(10)) Ping();
  const uint64_t n = link_.counters.timeouts.load();
  if (LogSampled(n)) {
    TIERFS_LOG(kWarning, "peer {} did not answer in time: its chunks are read here for {} ms",
               link_.address.name, Ms(link_.progress.slow_backoff / 2));
  }
}

void PeerConnection::MarkSlow(Clock::time_point now) {
  link_.status.slow_until.store((now + link_.progress.slow_backoff).time_since_epoch().count());
  link_.progress.slow_backoff = std::min(link_.progress.slow_backoff * 2, options_.retry_max);
}

bool PeerConnection::Wanted(Clock::time_point now) const {
  const auto at =
      Clock::time_point(Clock::duration(link_.status.wanted_at.load(std::memory_order_relaxed)));
  return now - at < std::chrono::seconds(1);
}

// A peer with fetches waiting that has been heard from since the oldest
// was sent is working on them (a home promoting from a slow PFS still
// answers pings from its progress thread at once): they wait up to their
// deadline. One that answers nothing, not even a ping, for the stall time
// is stopped or cut off: its waiting fetches end now (their callers read
// SOURCE) and it is slow, skipped until it answers pings again. Not dead:
// its chunks keep their home, and dead_after still decides death.
void PeerConnection::CheckStall(Clock::time_point now) {
  LinkProgress& c = link_.progress;
  Clock::time_point oldest = Clock::time_point::max();
  for (const auto& [id, p] : c.pending) {
    if (p->phase == PeerRequest::kWaiting) oldest = std::min(oldest, p->sent_at);
  }
  if (oldest == Clock::time_point::max() || c.last_heard >= oldest) return;
  // The probe: a ping once the oldest fetch waited half the stall time
  // with nothing heard.
  const auto stall = c.liveness.StallTime();
  if (c.last_ping < oldest || c.last_ping <= c.last_heard) {
    if (now - oldest >= stall / 2) Ping();
    return;
  }
  if (now - c.last_ping < stall) return;
  link_.counters.stalls++;
  MarkSlow(now);
  c.stalled = true;
  const size_t ended = EndWaiting(-ETIMEDOUT);
  const uint64_t n = link_.counters.stalls.load();
  if (LogSampled(n)) {
    TIERFS_LOG(kWarning,
               "peer {} answered nothing for {} ms, not even a ping: {} fetches read here, and "
               "its chunks read here until it answers",
               link_.address.name, Ms(now - oldest), ended);
  }
}

// Stalled, wanted, and silent for its silence bound (since its last
// answer, and since this connection came up): the connection is
// dropped (its requests end -ETIMEDOUT: their callers read SOURCE) and
// made again at the next tick, then every `probe` while reads want it,
// each attempt a fresh TCP connect bounded by probe_connect and resumed
// by its ticket. Not a death: its chunks keep their home until it has
// been silent for dead_after (TickDown). Logged at the stall.
void PeerConnection::Redial(Clock::time_point now) {
  link_.counters.reconnects_after_silence++;
  TIERFS_LOG(kDebug, "peer {}: silent for {} ms while stalled: connecting afresh",
             link_.address.name, Ms(now - link_.progress.last_heard));
  Forget(LinkState::kDown, -ETIMEDOUT);
  link_.progress.redialing = true;
  link_.status.retrying = true;
  link_.status.dead = false;
  link_.progress.retry_at = now;
}

// A redialed peer's failed connects are not its death before it has been
// silent for dead_after, as they would not be on the connection it had.
bool PeerConnection::SilentButNotDead(Clock::time_point now) const {
  return tierfs::SilentButNotDead(link_.progress.redialing, link_.progress.last_heard,
                                  options_.dead_after, now);
}

}  // namespace tierfs
