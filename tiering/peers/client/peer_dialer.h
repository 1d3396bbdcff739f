// PeerDialer: how a connection to a peer is opened before the transport
// carries it: the TCP handshake to the peer's door (peer_handshake.h: the
// server speaks first, both sides prove who they are with MUNGE, or the
// session is resumed by a ticket), which blocks, so it runs off the
// progress thread. HandshakeDialer does it on a pool of its own; the unit
// tests give PeerConnections a dialer they answer by hand.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "tiering/base/executor.h"
#include "tiering/peers/client/peer_client_options.h"
#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/secure/session_resumption.h"

namespace tierfs {

struct DialRequest {
  PeerAddress address;
  // Offered to resume the last session instead of a MUNGE handshake.
  std::optional<ResumeTicket> ticket;
  // The TCP connect's own bound (a retry's is short: probe_connect).
  std::chrono::milliseconds tcp_limit{0};
  // When it was asked for: the handshake has connect_timeout from when a
  // thread takes it, and is given up if it waited connect_timeout for one.
  std::chrono::steady_clock::time_point queued_at;
};

struct DialResult {
  HandshakeResult result = HandshakeResult::kLocal;
  std::string error;      // why not, when not kOk
  ClientSession session;  // kOk: the connection's keys, session and worker address
  // The ticket, if it never left this node (no TCP connection was made):
  // kept for the next attempt, so that retries through a cut resume.
  std::optional<ResumeTicket> unsent;
};

class PeerDialer {
 public:
  virtual ~PeerDialer() = default;
  // Starts `request`; `done` runs once with its result, on any thread.
  // False (done never runs) if it cannot be started: too much to do, or
  // shut down.
  virtual bool Dial(DialRequest request, std::function<void(DialResult)> done) = 0;
  // Drops the dials not started and waits for the running ones (their
  // `done` runs). Idempotent.
  virtual void Shutdown() = 0;
};

class HandshakeDialer final : public PeerDialer {
 public:
  // `auth` must outlive the dialer; of `options`, connect_timeout and source_port.
  HandshakeDialer(const PeerAuth* auth, const PeerClientOptions& options);
  bool Dial(DialRequest request, std::function<void(DialResult)> done) override;
  void Shutdown() override { pool_.Shutdown(); }

  // Handshakes at once: each mostly waits (the network, munged), and at
  // the start of an epoch a node may connect to hundreds of peers.
  static constexpr unsigned kThreads = 8;

 private:
  DialResult Run(const DialRequest& request) const;

  const PeerAuth* const auth_;
  const std::chrono::milliseconds connect_timeout_;
  const SourcePort source_port_;
  TaskPool pool_;
};

}  // namespace tierfs
