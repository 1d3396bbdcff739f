// PeerClient: a new transport in place of one whose UCX failed (an abort
// contained on its progress thread, which is parked there for good). The
// failed worker is never called again: its thread may hold UCX's locks of
// that worker, never ours (no UCX call is made under a lock of ours). A new
// UCX context and worker share nothing with it but UCX's process-wide
// state, whose locks the abort path does not hold; if the new worker is
// not made within the limit all the same, the client stays without
// peers, as it was (UcxWorker::MakeWithin).
#include <cerrno>

#include "tiering/base/log.h"
#include "tiering/peers/client/peer_client.h"
#include "tiering/peers/client/peer_link.h"

namespace tierfs {

Status PeerClient::Attach(std::unique_ptr<UcxWorker> ucx) {
  if (Status s = ucx->SetAmHandler(
          kPeerAmId,
          [this](const void* h, size_t hn, void* d, size_t n, const ucp_am_recv_param_t* param) {
            return OnMessage(h, hn, d, n, param);
          });
      !s.ok()) {
    return s;
  }
  ucx->SetEndpointErrorHandler([this](ucp_ep_h ep, ucs_status_t s) {
    auto it = by_ep_.find(ep);
    // A reset or refused connection is a dead peer; a transport timeout
    // (its progress starved, the network congested) is a slow one: its
    // chunks stay, and a reconnect that fails too takes it for dead.
    if (it != by_ep_.end())
      Down(*it->second, ucs_status_string(s), /*dead=*/s != UCS_ERR_ENDPOINT_TIMEOUT);
  });
  ucx_.store(ucx.get(), std::memory_order_release);
  workers_.push_back(std::move(ucx));
  return Status::Ok();
}

Status PeerClient::RestartTransport(std::chrono::milliseconds limit) {
  MutexLock restart(restart_mu_);
  if (stopped_.load()) return Status::Error(ESHUTDOWN, "the client has stopped");
  UcxWorker* failed = ucx();
  if (!failed->wedged()) return Status::Ok();
  auto made = UcxWorker::MakeWithin(options_.ucx, limit);
  if (!made.ok()) return made.status();
  failed->Abandon();  // no UCX call, no wait: its thread is parked
  ForgetTransport();
  if (Status s = Attach(std::move(made).value()); !s.ok()) return s;
  restarts_++;
  ucx()->Start([this] { Tick(); });
  return Status::Ok();
}

void PeerClient::ForgetTransport() {
  by_ep_.clear();
  by_session_.clear();
  const auto now = std::chrono::steady_clock::now();
  for (auto& lp : links_) {
    Link& l = *lp;
    // The failed worker may still hold a request's buffer (a receive it
    // began): kept, never reused. Each caller hears at once.
    std::vector<std::shared_ptr<Pending>> ended;
    for (auto& [id, p] : l.pending) ended.push_back(p);
    for (auto& p : ended) {
      if (p->phase == Pending::kReceiving) stranded_.push_back(p);
      Complete(l, p, -ECONNRESET);
    }
    l.pending.clear();
    l.ep = nullptr;
    l.crypto.reset();
    ++l.generation;  // a handshake under way for the failed worker is dropped
    const int state = l.state.load();
    if (state == kUp || state == kConnecting) {
      // Made again at the next tick, resumed by its ticket; reads go to
      // SOURCE meanwhile rather than wait for it.
      l.state = kDown;
      l.retrying = true;
      l.retry_at = now;
      l.backoff = options_.retry_min;
    }
    Signal(l);
  }
  open_ = 0;
  next_tick_ = {};
}

}  // namespace tierfs
