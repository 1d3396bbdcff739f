// PeerConnections: the ticks, and a connection's way up (the handshake on
// the dialer, the endpoint here); its way down is peer_connections_end.cc's.
#include "tiering/peers/client/peer_connections.h"

#include <algorithm>
#include <cerrno>

#include "tiering/base/log.h"

namespace tierfs {

using std::chrono::milliseconds;

PeerConnections::PeerConnections(const PeerClientOptions& options, PeerDialer* dialer, Now now)
    : options_(options), dialer_(dialer), now_(std::move(now)) {
  for (size_t i = 0; i < options_.peers.size(); ++i) {
    links_.push_back(std::make_unique<PeerLink>(i, options_));
  }
}

void PeerConnections::Start() {
  started_at_ = now_();
  if (options_.connect_at_start) {
    for (auto& l : links_) {
      l->status.state = LinkState::kDown;  // the first Tick connects it
      l->progress.retry_at = started_at_;
    }
  }
}

void PeerConnections::Tick() {
  const auto now = now_();
  if (now < next_tick_ || stopped_.load()) return;
  next_tick_ = now + milliseconds(10);
  const bool grace_over = now - started_at_ >= options_.grace;
  for (auto& lp : links_) {
    PeerLink& l = *lp;
    switch (l.status.state.load()) {
      case LinkState::kConnecting:
        // The handshake's own deadline has passed and its result is lost.
        if (now > l.progress.deadline + milliseconds(500)) {
          Down(l, "no handshake in time",
               (grace_over || l.progress.ever_up) && !SilentButNotDead(l, now));
        }
        break;
      case LinkState::kDown:
        TickDown(l, now, grace_over);
        break;
      case LinkState::kUp:
        TickUp(l, now);
        break;
      case LinkState::kIdle:
        break;
    }
  }
}

void PeerConnections::TickDown(PeerLink& l, Clock::time_point now, bool grace_over) {
  LinkProgress& c = l.progress;
  const DownStep step =
      NextDownStep(DownClocks(l, now), options_.dead_after, options_.probe, grace_over, now);
  if (step.death == DownStep::kSilent) {
    l.status.dead = true;
    c.redialing = false;  // its next connection is heard when made
    l.counters.downs++;
    TIERFS_LOG(kWarning,
               "peer {} is down (its chunks are kept by others meanwhile): silent for {} ms",
               l.address.name, Ms(now - c.last_heard));
  } else if (step.death == DownStep::kNeverUp) {
    l.status.dead = true;
    TIERFS_LOG(kWarning, "peer {} has not come up in {} s: its chunks are kept by others",
               l.address.name, Ms(options_.grace) / 1000);
  }
  if (step.dial == DownStep::kProbe) l.counters.probes++;
  if (step.dial != DownStep::kWait) Connect(l);
}

void PeerConnections::TickUp(PeerLink& l, Clock::time_point now) {
  LinkProgress& c = l.progress;
  // A ping when nothing came for a heartbeat: a quarter of dead_after, at most 1 s.
  const auto heartbeat = Heartbeat(options_.dead_after);
  const UpLinkTimers timers{options_.idle_close, options_.dead_after, options_.probe, heartbeat};
  const UpStep step = NextUpStep(UpClocks(l, now), timers, now);
  switch (step) {
    case UpStep::kClose:
      Close(l);
      break;
    case UpStep::kDown:
      Down(l, "silent for " + std::to_string(Ms(now - c.last_heard)) + " ms", /*dead=*/true);
      break;
    case UpStep::kRedial:
      Redial(l, now);  // down: made afresh at the next tick
      return;
    case UpStep::kPing:
      Ping(l);
      break;
    case UpStep::kProbe:  // its first answer ends the stall
      l.counters.probes++;
      Ping(l);
      break;
    case UpStep::kCheckStall:
      CheckStall(l, now);
      break;
  }
  EndAbandoned(l, now);
  // Slow, and has not answered a ping since: stays slow.
  if (auto until = SlowExtended(UpClocks(l, now), heartbeat, now)) {
    l.status.slow_until.store(until->time_since_epoch().count());
  }
}

DownLinkClocks PeerConnections::DownClocks(const PeerLink& l, Clock::time_point now) {
  const LinkProgress& p = l.progress;
  DownLinkClocks c;
  c.dead = l.status.dead.load();
  c.redialing = p.redialing;
  c.ever_up = p.ever_up;
  c.left = p.left;
  c.wanted = Wanted(l, now);
  c.last_heard = p.last_heard;
  c.retry_at = p.retry_at;
  c.last_attempt = p.last_attempt;
  return c;
}

UpLinkClocks PeerConnections::UpClocks(const PeerLink& l, Clock::time_point now) {
  const auto at = [](int64_t ns) { return Clock::time_point(Clock::duration(ns)); };
  const LinkProgress& p = l.progress;
  UpLinkClocks c;
  c.idle = p.pending.empty();
  c.last_used = at(l.status.last_used.load());
  c.last_heard = p.last_heard;
  c.last_ping = p.last_ping;
  c.connected_at = p.connected_at;
  c.slow_until = at(l.status.slow_until.load());
  c.stalled = p.stalled;
  c.wanted = Wanted(l, now);
  c.silence_bound = p.liveness.SilenceBound();
  return c;
}

void PeerConnections::Ping(PeerLink& l) {
  LinkProgress& c = l.progress;
  WireHeader h;
  c.ping_id = NextRequestId();
  size_t n =
      EncodeBare(MsgType::kPing, WireIds{c.ping_id, c.crypto->session, c.crypto->next_seq++}, &h);
  c.last_ping = now_();
  if (!SealWire(c.crypto->keys.send, &h, n, nullptr, 0, nullptr)) return;
  transport()->Send(c.ep, h, n, nullptr, 0, PeerTransport::kReply, [](bool) {});
}

void PeerConnections::Asked(PeerLink& l) {
  const LinkState state = l.status.state.load();
  if (state == LinkState::kIdle) {
    Connect(l);
  } else if (state != LinkState::kConnecting) {
    Signal(l);
  }
}

void PeerConnections::Connect(PeerLink& l) {
  if (open_.load() >= options_.max_connections) {
    PeerLink* lru = nullptr;
    for (auto& o : links_) {
      if (o->status.state.load() == LinkState::kUp && o->progress.pending.empty() &&
          (lru == nullptr || o->status.last_used.load() < lru->status.last_used.load())) {
        lru = o.get();
      }
    }
    if (lru == nullptr) {  // stays idle (not retried unasked); its waiters read SOURCE
      ++l.status.no_slot;
      Signal(l);
      return;
    }
    Close(*lru);
  }
  LinkProgress& c = l.progress;
  l.status.state = LinkState::kConnecting;
  ++open_;
  const uint64_t generation = ++c.generation;
  c.last_attempt = now_();
  DialRequest request;
  request.address = l.address;
  // A retry's TCP connect is short: one started while the peer was cut
  // off must not hold the next until a SYN retransmission seconds later.
  request.tcp_limit = l.status.retrying.load() ? options_.probe_connect : options_.connect_timeout;
  // The handshake has connect_timeout from when a thread takes it; waiting
  // for one (hundreds of peers asked at an epoch's start) may take as long
  // again. One that waited too long failed here, not there: not a death.
  request.queued_at = now_();
  c.deadline = request.queued_at + 2 * options_.connect_timeout;
  // A ticket is offered once: whatever this attempt comes to, it is spent
  // (unless no connection was made: then it never left this node, and it
  // is kept for the next attempt, so that retries through a cut resume).
  request.ticket = std::move(c.ticket);
  c.ticket.reset();
  const size_t index = l.index;
  const bool queued = dialer_->Dial(std::move(request), [this, index, generation](DialResult r) {
    transport()->Post([this, index, generation, r = std::move(r)]() mutable {
      OnDialed(*links_[index], generation, std::move(r));
    });
  });
  if (!queued) Down(l, "too much to do", false);
}

void PeerConnections::OnDialed(PeerLink& l, uint64_t generation, DialResult dialed) {
  LinkProgress& c = l.progress;
  if (generation != c.generation || l.status.state.load() != LinkState::kConnecting) return;
  if (stopped_.load()) return;  // shutting down: no new endpoint (Shutdown downs it)
  if (dialed.unsent && !c.ticket) c.ticket = std::move(dialed.unsent);
  const HandshakeResult r = dialed.result;
  const bool failure_is_death = r != HandshakeResult::kLocal &&
                                (c.ever_up || now_() - started_at_ >= options_.grace) &&
                                !SilentButNotDead(l, now_());
  if (r != HandshakeResult::kOk) {
    if (r == HandshakeResult::kRefused || r == HandshakeResult::kBadPeer) {
      l.counters.refused++;
      TIERFS_LOG(kWarning, "peer {}: {}", l.address.name, dialed.error);
      Down(l, dialed.error, /*dead=*/true);
      return;
    }
    if (r == HandshakeResult::kGarbage) l.counters.garbage++;
    Down(l, dialed.error, failure_is_death);
    return;
  }
  if (by_session_.count(dialed.session.session) != 0) {
    Down(l, "a session id already in use", failure_is_death);
    return;
  }
  Result<PeerEndpoint> ep = transport()->Connect(dialed.session.worker_address);
  if (!ep.ok()) {
    Down(l, "cannot reach its worker: " + ep.status().message(), failure_is_death);
    return;
  }
  Up(l, dialed.session, *ep);
}

void PeerConnections::Up(PeerLink& l, ClientSession& session, PeerEndpoint ep) {
  LinkProgress& c = l.progress;
  c.ep = ep;
  by_ep_[c.ep] = &l;
  c.crypto = std::make_shared<LinkCrypto>();
  c.crypto->keys = session.keys;
  c.crypto->session = session.session;
  by_session_[session.session] = &l;
  c.ticket = session.ticket;
  if (session.resumed) l.counters.resumed++;
  if (session.refused) l.counters.resume_refused++;
  l.status.state = LinkState::kUp;
  l.status.retrying = false;
  l.status.dead = false;
  c.ever_up = true;
  c.left = false;
  const auto up_at = now_();
  c.connected_at = up_at;
  // Made afresh after a silence: heard, and asked again, once it answers
  // this connection's first ping (its door may answer while its worker
  // does not), so dead_after still counts from its last answer.
  if (!c.redialing) {
    c.last_heard = up_at;
    EndStall(l);
  }
  c.answered = false;
  l.counters.connect_us +=
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                up_at - (c.deadline - 2 * options_.connect_timeout))
                                .count());
  // Made now: used now (idle_close counts from here, not from its last use).
  l.status.last_used.store(std::max(l.status.last_used.load(), up_at.time_since_epoch().count()));
  l.counters.ups++;
  // The session's first message: the server holds it from now on, however
  // long this node then stays quiet.
  Ping(l);
  if (c.redialing) {  // made afresh after a silence: its stall was logged
    TIERFS_LOG(kDebug, "peer {} is up again", l.address.name);
  } else {
    TIERFS_LOG(kInfo, "peer {} is up", l.address.name);
  }
  Signal(l);
}

}  // namespace tierfs
