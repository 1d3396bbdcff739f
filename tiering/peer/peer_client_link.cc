// PeerClient: the lifecycle of the connection to each peer (down,
// connecting, up), on the progress thread; MUNGE work on the pool.
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "tiering/log.h"
#include "tiering/peer/peer_client.h"
#include "tiering/peer/peer_link.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;

// The first IPv4 address of host:port, or an error message.
std::string Resolve(const PeerAddress& a, sockaddr_storage* out, socklen_t* len) {
  struct addrinfo hints {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  int e = ::getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &res);
  if (e != 0 || res == nullptr)
    return fmt::format("cannot resolve {}: {}", a.host, gai_strerror(e));
  std::memcpy(out, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return "";
}

}  // namespace

void PeerClient::Tick() {
  auto now = Clock::now();
  if (now < next_tick_ || stopped_.load()) return;
  next_tick_ = now + std::chrono::milliseconds(10);
  for (auto& l : links_) {
    int state = l->state.load();
    if (state == kConnecting && now > l->deadline) {
      Down(*l, "no answer to our hello in time");
    } else if (state == kDown && now >= l->retry_at) {
      Connect(*l);
    }
  }
}

// Resolving the address and making the hello's credential block: they run
// on the pool, the endpoint is made back on the progress thread.
void PeerClient::Connect(Link& l) {
  l.state = kConnecting;
  uint64_t generation = ++l.generation;
  l.nonce = RandomNonce();
  l.deadline = Clock::now() + options_.connect_timeout;
  const PeerIdentity& self = auth_->self();
  PeerClaim claim{PeerClaim::kHello, l.nonce, {}, self.job, self.name, l.address.name};
  size_t index = l.index;
  bool queued = pool_.Submit([this, index, generation, claim, address = l.address] {
    sockaddr_storage addr{};
    socklen_t len = 0;
    std::string cred, error = Resolve(address, &addr, &len);
    if (error.empty()) auth_->Make(claim, &cred, &error);
    ucx_.Post([this, index, generation, addr, len, cred, error]() mutable {
      Link& l = *links_[index];
      if (generation != l.generation || l.state.load() != kConnecting) return;
      if (error.empty()) l.ep = ucx_.Connect(reinterpret_cast<sockaddr*>(&addr), len, &error);
      if (l.ep == nullptr) {
        Down(l, error);
        return;
      }
      by_ep_[l.ep] = &l;
      auto body = std::make_shared<std::string>(std::move(cred));
      WireHeader h;
      size_t n = EncodeHello(0, &h);
      ucx_.Send(l.ep, kPeerAmId, h, n, body->data(), body->size(), UCP_AM_SEND_FLAG_REPLY,
                [body](ucs_status_t) {});  // a failure reaches the endpoint's error handler
    });
  });
  if (!queued) Down(l, "too much to do");
}

void PeerClient::OnAnswer(Link& l, std::string_view cred) {
  l.checking = true;
  size_t index = l.index;
  uint64_t generation = l.generation;
  bool queued = pool_.Submit(
      [this, index, generation, nonce = l.nonce, from = l.address.name, cred = std::string(cred)] {
        PeerClaim claim;
        std::string detail;
        AuthVerdict v = auth_->Check(cred, PeerClaim::kAnswer, &claim, &detail);
        if (v == AuthVerdict::kOk && claim.from != from) {
          v = AuthVerdict::kWrongPeer;
          detail = fmt::format("the answer comes from \"{}\"", claim.from);
        } else if (v == AuthVerdict::kOk && claim.echo != nonce) {
          v = AuthVerdict::kWrongPeer;
          detail = "the answer does not echo our hello";
        }
        ucx_.Post([this, index, generation, v, detail] {
          Link& l = *links_[index];
          if (generation != l.generation || l.state.load() != kConnecting) return;
          l.checking = false;
          if (v != AuthVerdict::kOk) {
            l.counters.refused++;
            Down(l, fmt::format("its answer is refused ({}): {}", AuthVerdictName(v), detail));
            return;
          }
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
    ucx_.Close(l.ep);  // ends its sends and receives
    l.ep = nullptr;
  }
  l.state = kDown;
  ++l.generation;
  l.checking = false;
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
