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
#include "tiering/peers/transport/ucx_transport.h"

namespace tierfs {

Status PeerClient::Attach(std::unique_ptr<PeerTransport> transport) {
  Status s =
      transport->SetHandlers([this](const PeerTransport::Message& m) { return OnMessage(m); },
                             [this](PeerEndpoint ep, bool timed_out, const std::string& why) {
                               connections_.OnEndpointError(ep, timed_out, why);
                             });
  if (!s.ok()) return s;
  connections_.SetTransport(transport.get());
  transports_.push_back(std::move(transport));
  return Status::Ok();
}

Status PeerClient::RestartTransport(std::chrono::milliseconds limit) {
  MutexLock restart(restart_mu_);
  if (connections_.stopped()) return Status::Error(ESHUTDOWN, "the client has stopped");
  PeerTransport* failed = transport();
  if (!failed->wedged()) return Status::Ok();
  auto made = UcxTransport::MakeWithin(options_.ucx, kPeerAmId, limit);
  if (!made.ok()) return made.status();
  failed->Abandon();  // no UCX call, no wait: its thread is parked
  // Its thread stopped for good and the new one has not started: this
  // thread alone on the progress thread's state.
  connections_.ForgetTransport(&stranded_);
  if (Status s = Attach(std::move(made).value()); !s.ok()) return s;
  restarts_++;
  transport()->Start([this] { connections_.Tick(); });
  return Status::Ok();
}

}  // namespace tierfs
