// PeerClient: the lifecycle of the connection to each peer (down,
// connecting, up), on the progress thread; the handshake on the pool.
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tiering/base/log.h"
#include "tiering/peer/peer_client.h"
#include "tiering/peer/peer_handshake.h"
#include "tiering/peer/peer_link.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

void PeerClient::Tick() {
  auto now = Clock::now();
  if (now < next_tick_ || stopped_.load()) return;
  next_tick_ = now + std::chrono::milliseconds(10);
  for (auto& l : links_) {
    int state = l->state.load();
    if (state == kConnecting && now > l->deadline + std::chrono::milliseconds(500)) {
      // The handshake's own deadline has passed and its result is lost.
      Down(*l, "no handshake in time");
    } else if (state == kDown && now >= l->retry_at) {
      Connect(*l);
    }
  }
}

// The handshake blocks (TCP, munged): it runs on the pool, bounded by the
// connect timeout; the endpoint is made back on the progress thread.
void PeerClient::Connect(Link& l) {
  l.state = kConnecting;
  uint64_t generation = ++l.generation;
  l.deadline = Clock::now() + options_.connect_timeout;
  size_t index = l.index;
  bool queued = pool_.Submit([this, index, generation, deadline = l.deadline, address = l.address] {
    std::string error;
    auto session = std::make_shared<ClientSession>();
    HandshakeResult r = HandshakeResult::kUnreachable;
    int fd = ConnectTcp(address.host, address.port, deadline, &error);
    if (fd >= 0) {
      r = RunClientHandshake(fd, *auth_, address.name, deadline, session.get(), &error);
      ::close(fd);
    }
    ucx_->Post([this, index, generation, r, session, error]() mutable {
      Link& l = *links_[index];
      if (generation != l.generation || l.state.load() != kConnecting) return;
      if (r != HandshakeResult::kOk) {
        if (r == HandshakeResult::kRefused || r == HandshakeResult::kBadPeer) {
          l.counters.refused++;
          TIERFS_LOG(kWarning, "peer {}: {}", l.address.name, error);
        } else if (r == HandshakeResult::kGarbage) {
          l.counters.garbage++;
        }
        Down(l, error);
        return;
      }
      if (by_session_.count(session->session) != 0) {
        Down(l, "a session id already in use");
        return;
      }
      l.ep = ucx_->Connect(session->worker_address, &error);
      if (l.ep == nullptr) {
        Down(l, "cannot reach its worker: " + error);
        return;
      }
      by_ep_[l.ep] = &l;
      l.crypto = std::make_shared<LinkCrypto>();
      l.crypto->keys = session->keys;
      l.crypto->session = session->session;
      by_session_[session->session] = &l;
      l.state = kUp;
      l.counters.ups++;
      TIERFS_LOG(kInfo, "peer {} is up", l.address.name);
    });
  });
  if (!queued) Down(l, "too much to do");
}

void PeerClient::Down(Link& l, const std::string& why) {
  int was = l.state.load();
  if (l.ep != nullptr) {
    by_ep_.erase(l.ep);
    ucx_->Close(l.ep);  // ends its sends and receives
    l.ep = nullptr;
  }
  if (l.crypto) {
    by_session_.erase(l.crypto->session);
    l.crypto.reset();
  }
  l.state = kDown;
  ++l.generation;
  l.retry_at = Clock::now() + l.backoff;
  l.backoff = std::min(l.backoff * 2, options_.retry_max);
  if (stopped_.load()) {
    // shutting down: nothing to say
  } else if (was == kUp) {
    l.counters.downs++;
    TIERFS_LOG(
        kWarning, "peer {} is down: {}; retrying in {} ms", l.address.name, why,
        std::chrono::duration_cast<std::chrono::milliseconds>(l.retry_at - Clock::now()).count());
  } else if (was == kConnecting) {
    l.counters.connect_failures++;
    TIERFS_LOG(kDebug, "peer {}: no connection: {}", l.address.name, why);
  }
  // Requests not receiving end now; a receive ends when UCX purges the
  // closed endpoint (its completion removes it).
  std::vector<std::shared_ptr<Pending>> ended;
  for (auto& [id, p] : l.pending) {
    if (p->phase != Pending::kReceiving) ended.push_back(p);
  }
  for (auto& p : ended) Complete(l, p, -EHOSTDOWN);
}

}  // namespace tierfs
