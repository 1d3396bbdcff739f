// PeerClient: asks the job's other nodes for chunks.
//
// One connection per peer (PeerConnection, peer_connection.h: its
// lifecycle, heartbeats, stalls and redials on the progress thread; their
// table is PeerConnections), opened on first need by the TCP handshake
// (PeerDialer: the server speaks first, both sides prove who they are with
// MUNGE, keys are derived for this connection) and then carried by a
// PeerTransport (UCX) to the worker address the server gave. Its first
// message is a kPing, so the server holds the session from then on.
//
// A peer is dead (JobPeers homes its chunks elsewhere) when it is silent
// for dead_after, its transport fails, or it breaks the protocol; slow
// (Fetches skip it: -EBUSY at once, the caller reads SOURCE) when a Fetch
// timed out or it stalled; its chunks keep their home while it is only
// slow. A Fetch waits for the first connect of an idle link, never for a
// retry after a failure (it reads SOURCE meanwhile).
//
// Fetch is called by many threads at once. At most `max_in_flight`
// requests per peer are outstanding; a caller beyond waits for a slot
// until its deadline. The answer's sealed bytes land in a buffer of the
// request's own; the caller opens them (checks the tag, decrypts) into its
// destination, so no byte reaches it unverified, and a caller whose
// deadline passes returns at once: a late transfer ends in that buffer.
// A message that does not authenticate (anyone can forge a session id and
// a request id: both travel in clear) is counted and ignored; it never
// ends a connection or a Fetch but its own.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/latency_histogram.h"
#include "tiering/base/mutex.h"
#include "tiering/peers/client/peer_answers.h"
#include "tiering/peers/client/peer_client_options.h"
#include "tiering/peers/client/peer_connections.h"
#include "tiering/peers/client/peer_dialer.h"
#include "tiering/peers/client/peer_link.h"
#include "tiering/peers/client/peer_offers.h"
#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/transport/buffer_pool.h"
#include "tiering/peers/transport/peer_transport.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {

// The "up" and "down" gauges; JobPeers reports them too when it has no client.
inline constexpr About kPeersUp{"Peers of the job this node is connected to."};
inline constexpr About kPeersDown{"Peers of the job this node is not connected to."};

class PeerClient {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // What a hedged Fetch races its peer with: `read` fills the Fetch's
  // destination with the same bytes from SOURCE (their count, or -errno).
  // `used`: the bytes the Fetch returned are SOURCE's.
  struct Hedge {
    std::function<ssize_t(char* dest)> read;
    bool used = false;
  };

  // `auth` must outlive the client. An error if UCX cannot start. No
  // connection is made before Start.
  static Result<std::unique_ptr<PeerClient>> Make(PeerAuth* auth, PeerClientOptions options);
  ~PeerClient();  // Stop()

  void Start();
  // Closes the connections (kBye to each peer up): a Fetch still waiting
  // returns at once (-EHOSTDOWN, or -ESHUTDOWN if its answer was arriving).
  // Idempotent.
  void Stop();

  size_t size() const { return connections_.size(); }
  const std::string& name(size_t peer) const;
  bool up(size_t peer) const;
  // Dead: not to be a home (see above). A peer not yet asked is not dead.
  bool dead(size_t peer) const;
  // Connections up or being made, now.
  size_t open_connections() const { return connections_.open(); }
  const PeerLinkCounters& counters(size_t peer) const;
  uint64_t stray() const { return answers_.stray(); }  // messages from no known endpoint

  // Fetches chunk `ref` from peer `peer` into `dest` (ref.length() bytes).
  // Returns ref.length(), or -errno: -EHOSTDOWN (not up: not asked),
  // -ETIMEDOUT (no answer by `deadline`: the peer is now slow), -EBUSY (no
  // slot by the deadline, the peer is busy, or slow), -ENOENT/-ESTALE/-EINVAL/-EIO
  // (the peer's answer), -EPROTO (the peer broke the protocol: cut off),
  // -EBADMSG (the answer does not authenticate: ignored), -ECONNRESET
  // (connection lost, or the peer forgot the session), -ESHUTDOWN, -EINVAL
  // (a bad ref). An idle peer is connected first, within `deadline`.
  // Returns by `deadline`, or a progress round later (200 ms at most) after
  // a timeout, once the peer is marked slow. On error `dest` holds no promise.
  // With `flags` kIfResident, -ENODATA: the peer neither holds the chunk
  // nor is promoting it (the caller reads SOURCE, and may Offer the copy).
  // With `hedge`: once the peer has not begun to answer for its hedge
  // time (hedge_after), hedge->read fills `dest` from SOURCE on this
  // thread, and if it succeeds its count is returned with hedge->used set;
  // the request is left to the progress thread, and a late answer lands in
  // the request's own buffer and is dropped. Thread-safe.
  ssize_t Fetch(size_t peer, const ChunkRef& ref, char* dest, Deadline deadline, uint16_t flags = 0,
                Hedge* hedge = nullptr);
  // A read wanted `peer` and could not have it (its chunks went elsewhere
  // while it was taken for gone): it is probed on a short timer for a while.
  void Want(size_t peer);
  // How long a hedged Fetch waits for `peer` before it reads SOURCE too.
  std::chrono::microseconds hedge_after(size_t peer) const;
  // Offers the whole chunk `ref` (its range ignored), whose ref.chunk_length()
  // bytes are at `data`, to peer `peer`: copied, sealed and sent without
  // waiting; the peer keeps it if it has room and its snapshot agrees, and
  // never answers. False if not sent: the peer is not up, or max_offers /
  // max_offer_bytes are in flight (counted as dropped). Thread-safe.
  bool Offer(size_t peer, const ChunkRef& ref, const char* data);

  // UCX failed under this client (an abort contained on its progress
  // thread): it asks nobody until RestartTransport. Thread-safe.
  bool transport_failed() const { return transport()->wedged(); }
  // A new UCX context and worker in place of a failed one, made within
  // `limit`: the failed worker and its thread are left as they are, never
  // called again; the requests waiting on it end
  // (-ECONNRESET: their callers read SOURCE); the connections that were up
  // are made again at once (resumed by their tickets), the others as
  // before. Thread-safe; an error if stopped or UCX cannot start.
  Status RestartTransport(std::chrono::milliseconds limit = std::chrono::seconds(10));
  uint64_t transport_restarts() const { return restarts_.load(); }
  // Tests: the transport fails as after a contained abort (UcxWorker::WedgeForTest).
  void WedgeForTest() { transport()->WedgeForTest(); }

  // Latency of the fetches that returned the bytes, all peers.
  const LatencyHistogram& latency() const { return latency_; }
  // Peers up and down, and the list "remote": each peer's state and counters.
  void VisitCounters(CounterVisitor& v) const;

 private:
  PeerClient(PeerAuth* auth, PeerClientOptions options);
  // Makes `transport` this client's: its handlers set, kept, current.
  Status Attach(std::unique_ptr<PeerTransport> transport) REQUIRES(restart_mu_);
  PeerTransport* transport() const { return connections_.transport(); }

  // Progress thread: `p` sealed and sent on its link's connection.
  void Send(const std::shared_ptr<PeerRequest>& p);

  // The caller's thread.
  // Up to the caller's deadline for a connection to an idle or connecting
  // peer to come up; true if it is up.
  bool AwaitUp(PeerLink& l, Deadline deadline);
  // One request to `l` (a slot held) and its answer, opened into `dest`.
  ssize_t Ask(PeerLink& l, const ChunkRef& ref, char* dest, Deadline deadline, uint16_t flags,
              Hedge* hedge);
  ssize_t Wait(PeerLink& l, const std::shared_ptr<PeerRequest>& p, Deadline deadline);
  // Races SOURCE (hedge) with `p` once `l` has not begun to answer for its
  // hedge time: true if SOURCE's bytes are in `dest` (*result their count).
  bool Race(PeerLink& l, const std::shared_ptr<PeerRequest>& p, char* dest, Hedge* hedge,
            ssize_t* result);

  const PeerClientOptions options_;
  HandshakeDialer dialer_;
  PeerConnections connections_;
  // Serialises Stop and RestartTransport; guards transports_ and stranded_.
  // Taken before any other lock of the client's.
  Mutex restart_mu_;
  // Every transport this client made, the one in use last. A failed one
  // is kept, never called again nor destroyed before the client: UCX may
  // still hold pointers into it.
  std::vector<std::unique_ptr<PeerTransport>> transports_ GUARDED_BY(restart_mu_);
  // Requests a failed transport was receiving into: kept, buffers and all.
  std::vector<std::shared_ptr<PeerRequest>> stranded_ GUARDED_BY(restart_mu_);
  std::atomic<uint64_t> restarts_{0};
  std::shared_ptr<BufferPool> buffers_;  // answers' and offers' buffers, kept for reuse
  PeerAnswers answers_;
  PeerOffers offers_;
  LatencyHistogram latency_;
};

}  // namespace tierfs
