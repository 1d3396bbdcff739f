#include "tiering/peers/client/peer_dialer.h"

#include <unistd.h>

#include <algorithm>

namespace tierfs {

using Clock = std::chrono::steady_clock;

HandshakeDialer::HandshakeDialer(const PeerAuth* auth, const PeerClientOptions& options)
    : auth_(auth),
      connect_timeout_(options.connect_timeout),
      source_port_(options.source_port),
      pool_(kThreads, 4 * 1024, "peer handshake") {}

bool HandshakeDialer::Dial(DialRequest request, std::function<void(DialResult)> done) {
  return pool_.Submit(
      [this, request = std::move(request), done = std::move(done)] { done(Run(request)); });
}

// Bounded by connect_timeout from when a thread takes it, and by twice
// that from when it was asked for; one that waited too long for a thread
// failed here (kLocal), not there: not a death.
DialResult HandshakeDialer::Run(const DialRequest& request) const {
  DialResult r;
  r.unsent = request.ticket;
  const auto start = Clock::now();
  const auto deadline =
      std::min(start + connect_timeout_, request.queued_at + 2 * connect_timeout_);
  if (start - request.queued_at >= connect_timeout_) {
    r.error = "too many connections being made at once here";
    return r;
  }
  Result<int> fd = ConnectTcp(request.address.host, request.address.port,
                              std::min(deadline, start + request.tcp_limit), source_port_);
  if (!fd.ok()) {
    r.result = HandshakeResult::kUnreachable;
    r.error = fd.status().message();
    return r;
  }
  r.unsent.reset();
  Result<ClientSession> made = RunClientHandshake(*fd, *auth_, request.address.name, deadline,
                                                  request.ticket ? &*request.ticket : nullptr);
  ::close(*fd);
  r.result = HandshakeFailure(made.status());
  if (made.ok()) {
    r.session = std::move(*made);
  } else {
    r.error = made.status().message();
  }
  return r;
}

}  // namespace tierfs
