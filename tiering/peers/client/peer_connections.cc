#include "tiering/peers/client/peer_connections.h"

#include <algorithm>
#include <cerrno>

#include "tiering/base/log.h"

namespace tierfs {

using std::chrono::milliseconds;

PeerConnections::PeerConnections(const PeerClientOptions& options, PeerDialer* dialer, Now now)
    : options_(options), dialer_(dialer), now_(std::move(now)) {
  ConnectionTable* const table = this;  // what each connection may ask of this table
  for (size_t i = 0; i < options_.peers.size(); ++i) {
    connections_.push_back(std::make_unique<PeerConnection>(i, options_, table));
  }
}

void PeerConnections::Start() {
  started_at_ = now_();
  if (options_.connect_at_start) {
    for (auto& c : connections_) {
      c->link().status.state = LinkState::kDown;  // the first Tick connects it
      c->link().progress.retry_at = started_at_;
    }
  }
}

void PeerConnections::Tick() {
  const auto now = now_();
  if (now < next_tick_ || stopped_.load()) return;
  next_tick_ = now + milliseconds(10);
  const bool grace_over = now - started_at_ >= options_.grace;
  for (auto& cp : connections_) {
    PeerConnection& c = *cp;
    const PeerLink& l = c.link();
    switch (l.status.state.load()) {
      case LinkState::kConnecting:
        // The handshake's own deadline has passed and its result is lost.
        if (now > l.progress.deadline + milliseconds(500)) {
          c.Down("no handshake in time",
                 (grace_over || l.progress.ever_up) && !c.SilentButNotDead(now));
        }
        break;
      case LinkState::kDown:
        c.TickDown(now, grace_over);
        break;
      case LinkState::kUp:
        c.TickUp(now);
        break;
      case LinkState::kIdle:
        break;
    }
  }
}

void PeerConnections::Asked(PeerConnection& c) {
  const LinkState state = c.link().status.state.load();
  if (state == LinkState::kIdle) {
    Connect(c);
  } else if (state != LinkState::kConnecting) {
    c.Signal();
  }
}

void PeerConnections::Connect(PeerConnection& conn) {
  PeerLink& l = conn.link();
  if (open_.load() >= options_.max_connections) {
    PeerConnection* lru = nullptr;
    for (auto& o : connections_) {
      const LinkStatus& s = o->link().status;
      if (s.state.load() == LinkState::kUp && o->link().progress.pending.empty() &&
          (lru == nullptr || s.last_used.load() < lru->link().status.last_used.load())) {
        lru = o.get();
      }
    }
    if (lru == nullptr) {  // stays idle (not retried unasked); its waiters read SOURCE
      ++l.status.no_slot;
      conn.Signal();
      return;
    }
    lru->Close();
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
      OnDialed(*connections_[index], generation, std::move(r));
    });
  });
  if (!queued) conn.Down("too much to do", false);
}

void PeerConnections::OnDialed(PeerConnection& conn, uint64_t generation, DialResult dialed) {
  PeerLink& l = conn.link();
  LinkProgress& c = l.progress;
  if (generation != c.generation || l.status.state.load() != LinkState::kConnecting) return;
  if (stopped_.load()) return;  // shutting down: no new endpoint (Shutdown downs it)
  if (dialed.unsent && !c.ticket) c.ticket = std::move(dialed.unsent);
  const HandshakeResult r = dialed.result;
  const bool failure_is_death = r != HandshakeResult::kLocal &&
                                (c.ever_up || now_() - started_at_ >= options_.grace) &&
                                !conn.SilentButNotDead(now_());
  if (r != HandshakeResult::kOk) {
    if (r == HandshakeResult::kRefused || r == HandshakeResult::kBadPeer) {
      l.counters.refused++;
      TIERFS_LOG(kWarning, "peer {}: {}", l.address.name, dialed.error);
      conn.Down(dialed.error, /*dead=*/true);
      return;
    }
    if (r == HandshakeResult::kGarbage) l.counters.garbage++;
    conn.Down(dialed.error, failure_is_death);
    return;
  }
  if (by_session_.count(dialed.session.session) != 0) {
    conn.Down("a session id already in use", failure_is_death);
    return;
  }
  Result<PeerEndpoint> ep = transport()->Connect(dialed.session.worker_address);
  if (!ep.ok()) {
    conn.Down("cannot reach its worker: " + ep.status().message(), failure_is_death);
    return;
  }
  Up(conn, dialed.session, *ep);
}

void PeerConnections::Up(PeerConnection& conn, ClientSession& session, PeerEndpoint ep) {
  PeerLink& l = conn.link();
  LinkProgress& c = l.progress;
  c.ep = ep;
  by_ep_[c.ep] = &conn;
  c.crypto = std::make_shared<LinkCrypto>();
  c.crypto->keys = session.keys;
  c.crypto->session = session.session;
  by_session_[session.session] = &conn;
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
    conn.EndStall();
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
  conn.Ping();
  if (c.redialing) {  // made afresh after a silence: its stall was logged
    TIERFS_LOG(kDebug, "peer {} is up again", l.address.name);
  } else {
    TIERFS_LOG(kInfo, "peer {} is up", l.address.name);
  }
  conn.Signal();
}

// A reset or refused connection is a dead peer; a transport timeout (its
// progress starved, the network congested) is a slow one: its chunks
// stay, and a reconnect that fails too takes it for dead.
void PeerConnections::OnEndpointError(PeerEndpoint ep, bool timed_out, const std::string& why) {
  auto it = by_ep_.find(ep);
  if (it != by_ep_.end()) it->second->Down(why, /*dead=*/!timed_out);
}

PeerConnection* PeerConnections::BySession(uint64_t session) const {
  auto it = by_session_.find(session);
  return it == by_session_.end() ? nullptr : it->second;
}

void PeerConnections::Shutdown() {
  LogEnd();
  for (auto& c : connections_) c->Close();
  for (auto& c : connections_) c->Down("shutting down", false);
}

bool PeerConnections::Settled() const {
  return std::none_of(connections_.begin(), connections_.end(), [](const auto& c) {
    return c->link().status.state.load() == LinkState::kUp && !c->link().progress.answered;
  });
}

void PeerConnections::EndAll(ssize_t error) {
  for (auto& c : connections_) {
    auto pending = std::move(c->link().progress.pending);
    for (auto& [id, p] : pending) c->Complete(p, error);
  }
}

void PeerConnections::ForgetTransport(std::vector<std::shared_ptr<PeerRequest>>* stranded) {
  by_ep_.clear();
  by_session_.clear();
  const auto now = now_();
  for (auto& cp : connections_) {
    PeerLink& l = cp->link();
    LinkProgress& c = l.progress;
    // The failed transport may still hold a request's buffer (a receive it
    // began): kept, never reused. Each caller hears at once.
    std::vector<std::shared_ptr<PeerRequest>> ended;
    for (auto& [id, p] : c.pending) ended.push_back(p);
    for (auto& p : ended) {
      if (p->phase == PeerRequest::kReceiving) stranded->push_back(p);
      cp->Complete(p, -ECONNRESET);
    }
    c.pending.clear();
    c.ep = nullptr;
    c.crypto.reset();
    ++c.generation;  // a handshake under way for the failed transport is dropped
    const LinkState state = l.status.state.load();
    if (state == LinkState::kUp || state == LinkState::kConnecting) {
      // Made again at the next tick, resumed by its ticket; reads go to
      // SOURCE meanwhile rather than wait for it.
      l.status.state = LinkState::kDown;
      l.status.retrying = true;
      c.retry_at = now;
      c.backoff = options_.retry_min;
    }
    cp->Signal();
  }
  open_ = 0;
  next_tick_ = {};
}

// One line for the whole job at its end, rather than one per peer: at
// 1,024 nodes a job's end would otherwise log a thousand transport errors
// on every node.
void PeerConnections::LogEnd() {
  size_t up = 0, left = 0, lost = 0, never = 0;
  for (const auto& c : connections_) {
    const PeerLink& l = c->link();
    const LinkState state = l.status.state.load();
    if (state == LinkState::kUp || state == LinkState::kIdle) {
      up += l.progress.ever_up;
      never += !l.progress.ever_up;
    } else if (l.progress.left) {
      ++left;
    } else if (l.progress.ever_up) {
      ++lost;
    } else {
      ++never;
    }
  }
  TIERFS_LOG(kInfo,
             "peers at the end: {} left the job, {} lost without a word, {} still there, {} never "
             "reached (of {})",
             left, lost, up, never, connections_.size());
}

}  // namespace tierfs
