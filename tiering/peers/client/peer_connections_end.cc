// PeerConnections: a connection's ways down (a failure, kBye, the peer
// leaving or forgetting the session, the transport failing under it, the
// client stopping) and the requests they end.
#include <algorithm>
#include <cerrno>

#include "tiering/base/log.h"
#include "tiering/peers/client/peer_connections.h"

namespace tierfs {

// Forgets the connection's endpoint and keys, and ends its requests that
// are not receiving (a receive ends when the transport purges the closed
// endpoint).
LinkState PeerConnections::Forget(PeerLink& l, LinkState next, ssize_t error) {
  LinkProgress& c = l.progress;
  const LinkState was = l.status.state.load();
  if (c.ep != nullptr) {
    by_ep_.erase(c.ep);
    transport()->Close(c.ep);  // ends its sends and receives
    c.ep = nullptr;
  }
  if (c.crypto) {
    by_session_.erase(c.crypto->session);
    c.crypto.reset();
  }
  if (was == LinkState::kUp || was == LinkState::kConnecting) --open_;
  l.status.state = next;
  ++c.generation;
  EndWaiting(l, error);
  Signal(l);
  return was;
}

void PeerConnections::Close(PeerLink& l) {
  if (l.status.state.load() != LinkState::kUp) return;
  LinkProgress& c = l.progress;
  WireHeader h;
  size_t n = EncodeBare(MsgType::kBye, WireIds{0, c.crypto->session, c.crypto->next_seq++}, &h);
  if (SealWire(c.crypto->keys.send, &h, n, nullptr, 0, nullptr)) {
    // The endpoint closes once the kBye is out (a forced close could drop it).
    PeerEndpoint ep = c.ep;
    by_ep_.erase(ep);
    c.ep = nullptr;
    transport()->Send(ep, h, n, nullptr, 0, 0, [this, ep](bool) { transport()->Close(ep); });
  }
  l.counters.closed_idle++;
  Forget(l, LinkState::kIdle);
  TIERFS_LOG(kDebug, "peer {}: connection closed, unused", l.address.name);
}

void PeerConnections::Down(PeerLink& l, const std::string& why, bool dead) {
  LinkProgress& c = l.progress;
  const LinkState was = Forget(l, LinkState::kDown);
  l.status.retrying = true;
  l.status.dead = dead;
  // Taken for gone: its next connection is heard when made (else, made
  // after dead_after of silence, it would be down again before its first
  // answer could come).
  if (dead) c.redialing = false;
  c.retry_at = now_() + c.backoff;
  c.backoff = std::min(c.backoff * 2, options_.retry_max);
  if (stopped_.load()) {
    // shutting down: nothing to say
  } else if (was == LinkState::kUp) {
    l.counters.downs++;
    TIERFS_LOG(kWarning, "peer {} is down{}: {}; retrying in {} ms", l.address.name,
               dead ? " (its chunks are kept by others meanwhile)" : "", why,
               Ms(c.retry_at - now_()));
  } else if (was == LinkState::kConnecting) {
    l.counters.connect_failures++;
    TIERFS_LOG(kDebug, "peer {}: no connection: {}", l.address.name, why);
  }
}

// Its server is stopping: no warning, no transport error to wait for.
// Gone (its chunks go elsewhere), retried only at the longest backoff, in
// case its node mounts again within the job.
void PeerConnections::Leaving(PeerLink& l) {
  LinkProgress& c = l.progress;
  Forget(l, LinkState::kDown, -ECONNRESET);
  c.left = true;
  l.status.dead = true;
  c.redialing = false;
  l.status.retrying = true;
  c.backoff = options_.retry_max;
  c.retry_at = now_() + options_.retry_max;
  // Counted last: whoever sees it counted sees the link down and dead.
  l.counters.left++;
  TIERFS_LOG(kDebug, "peer {} is leaving the job", l.address.name);
}

// The peer dropped this session (it heard nothing from us for long):
// connect again now; the Fetches it ends ask again on the new one. Not
// dead: its chunks keep their home. Told so on a keep-alive, nothing is
// waiting: idle until next needed (two nodes competing for a full
// server's last slot must not take it from each other at every heartbeat).
void PeerConnections::Forgotten(PeerLink& l) {
  l.counters.resets++;
  const bool wanted = !l.progress.pending.empty();
  Forget(l, LinkState::kIdle, -ECONNRESET);  // its Fetches ask again once it is up
  TIERFS_LOG(kInfo, "peer {} had forgotten this node's connection{}", l.address.name,
             wanted ? ": connecting again" : "");
  if (wanted) Connect(l);
}

// A reset or refused connection is a dead peer; a transport timeout (its
// progress starved, the network congested) is a slow one: its chunks
// stay, and a reconnect that fails too takes it for dead.
void PeerConnections::OnEndpointError(PeerEndpoint ep, bool timed_out, const std::string& why) {
  auto it = by_ep_.find(ep);
  if (it != by_ep_.end()) Down(*it->second, why, /*dead=*/!timed_out);
}

PeerLink* PeerConnections::BySession(uint64_t session) const {
  auto it = by_session_.find(session);
  return it == by_session_.end() ? nullptr : it->second;
}

void PeerConnections::Complete(PeerLink& l, const std::shared_ptr<PeerRequest>& p, ssize_t result) {
  {
    MutexLock lock(p->mu);
    if (p->phase == PeerRequest::kDone) return;
    p->phase = PeerRequest::kDone;
    p->result = result;
  }
  p->cv.NotifyAll();
  l.progress.pending.erase(p->id);
}

void PeerConnections::Shutdown() {
  LogEnd();
  for (auto& l : links_) Close(*l);
  for (auto& l : links_) Down(*l, "shutting down", false);
}

bool PeerConnections::Settled() const {
  return std::none_of(links_.begin(), links_.end(), [](const auto& l) {
    return l->status.state.load() == LinkState::kUp && !l->progress.answered;
  });
}

void PeerConnections::EndAll(ssize_t error) {
  for (auto& l : links_) {
    auto pending = std::move(l->progress.pending);
    for (auto& [id, p] : pending) Complete(*l, p, error);
  }
}

void PeerConnections::ForgetTransport(std::vector<std::shared_ptr<PeerRequest>>* stranded) {
  by_ep_.clear();
  by_session_.clear();
  const auto now = now_();
  for (auto& lp : links_) {
    PeerLink& l = *lp;
    LinkProgress& c = l.progress;
    // The failed transport may still hold a request's buffer (a receive it
    // began): kept, never reused. Each caller hears at once.
    std::vector<std::shared_ptr<PeerRequest>> ended;
    for (auto& [id, p] : c.pending) ended.push_back(p);
    for (auto& p : ended) {
      if (p->phase == PeerRequest::kReceiving) stranded->push_back(p);
      Complete(l, p, -ECONNRESET);
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
    Signal(l);
  }
  open_ = 0;
  next_tick_ = {};
}

// One line for the whole job at its end, rather than one per peer: at
// 1,024 nodes a job's end would otherwise log a thousand transport errors
// on every node.
void PeerConnections::LogEnd() {
  size_t up = 0, left = 0, lost = 0, never = 0;
  for (const auto& l : links_) {
    const LinkState state = l->status.state.load();
    if (state == LinkState::kUp || state == LinkState::kIdle) {
      up += l->progress.ever_up;
      never += !l->progress.ever_up;
    } else if (l->progress.left) {
      ++left;
    } else if (l->progress.ever_up) {
      ++lost;
    } else {
      ++never;
    }
  }
  TIERFS_LOG(kInfo,
             "peers at the end: {} left the job, {} lost without a word, {} still there, {} never "
             "reached (of {})",
             left, lost, up, never, links_.size());
}

}  // namespace tierfs
