// PeerServer's transport: made (UCX's, or the one a test gives), attached
// (its handler set), and made anew in place of one whose UCX failed (an
// abort contained on its progress thread, which is parked there for
// good). The failed worker is never called again: its thread may hold
// UCX's locks of that worker, never ours (no UCX call is made under a lock
// of ours); what it was sending or receiving stays where it is (buffers
// and holds included). Its sessions are dropped: their peers hear nothing
// more on them, take this node for stalled, then gone (their peer_dead),
// and connect again through the door, which kept its socket and names the
// new worker from now on. If the new transport is not made within the
// limit, the server stays without peers, as it was (UcxTransport::MakeWithin,
// or the maker the server was made with).
#include <cerrno>

#include "tiering/base/log.h"
#include "tiering/peers/server/peer_server.h"
#include "tiering/peers/server/peer_server_internal.h"
#include "tiering/peers/transport/ucx_transport.h"

namespace tierfs {

Result<std::unique_ptr<PeerServer>> PeerServer::Make(PeerAuth* auth, ChunkProvider* provider,
                                                     PeerServerOptions options) {
  auto made = UcxTransport::Make(options.ucx, kPeerAmId);
  if (!made.ok()) return made.status();
  const UcxOptions ucx = options.ucx;
  return Make(auth, provider, std::move(options), std::move(made).value(),
              [ucx](std::chrono::milliseconds limit) {
                return UcxTransport::MakeWithin(ucx, kPeerAmId, limit);
              });
}

Result<std::unique_ptr<PeerServer>> PeerServer::Make(PeerAuth* auth, ChunkProvider* provider,
                                                     PeerServerOptions options,
                                                     std::unique_ptr<PeerTransport> transport,
                                                     TransportMaker remake) {
  std::unique_ptr<PeerServer> server(
      new PeerServer(auth, provider, std::move(options), transport->Address(), std::move(remake)));
  {
    MutexLock restart(server->restart_mu_);
    if (Status s = server->Attach(std::move(transport)); !s.ok()) return s;
  }
  return server;
}

// The server makes no endpoint of its own (it answers on its clients'
// reply endpoints): no endpoint error handler.
Status PeerServer::Attach(std::unique_ptr<PeerTransport> transport) {
  if (Status s = transport->SetHandlers(
          [this](const PeerTransport::Message& m) { return OnMessage(m); }, nullptr);
      !s.ok()) {
    return s;
  }
  transport_.store(transport.get(), std::memory_order_release);
  transports_.push_back(std::move(transport));
  return Status::Ok();
}

Status PeerServer::RestartTransport(std::chrono::milliseconds limit) {
  MutexLock restart(restart_mu_);
  if (stopped_) return Status::Error(ESHUTDOWN, "the server has stopped");
  PeerTransport* failed = transport();
  if (!failed->wedged()) return Status::Ok();
  auto made = remake_(limit);
  if (!made.ok()) return made.status();
  failed->Abandon();  // no UCX call, no wait: its thread is parked
  // This thread alone on the progress thread's state now. The requests
  // being read for the failed sessions finish on the pool and find no
  // session; their budgets (and everything else in flight) start afresh.
  by_session_.clear();
  counters_.open = 0;
  in_flight_ = 0;
  counters_.bytes_in_flight = 0;
  ++epoch_;
  next_tick_ = {};
  // The door names the new worker before it serves again (it turns
  // handshakes away while the current worker is the failed one).
  door_->SetWorkerAddress((*made)->Address());
  if (Status s = Attach(std::move(made).value()); !s.ok()) return s;
  restarts_++;
  transport()->Start([this] { Tick(); });
  return Status::Ok();
}

}  // namespace tierfs
