// PeerServer: answers the chunk requests of the job's other nodes.
//
// Connections come in through a PeerDoor (peer_door.h): a peer is
// authenticated on a plain TCP socket before this node spends anything on
// it, and leaves a session (its keys). The client connects to this
// server's transport (a PeerTransport: UCX, over one UcxWorker); the first
// sealed message naming the session takes it, and its reply endpoint
// carries the answers. (An endpoint of the server's own back to the
// client's worker would make two opposite connections between the same
// workers, which UCX 1.13's TCP transport does not survive.) Every message
// must open under the session's key with a sequence number not seen
// before; one that does not (forged, altered, replayed) is counted and
// is counted and ignored (anyone can name a session: its id travels in
// clear); one that opens but breaks the protocol cuts the session off. A
// message naming no session is counted and dropped; one naming a session
// this server dropped (silent for idle_timeout, or cut off), and opening
// under its kept keys, is answered kUnknownSession, so its client
// connects again at once. A kPing is answered kPong; a kBye ends its
// session. Stop tells every session kLeaving, so that its clients drop
// their links without a transport error each.
//
// Requests go to a TaskPool of `threads` threads that call the
// ChunkProvider; the answer (kData or kError), sealed on that thread, goes
// back on the progress thread. Bounded: at most `max_in_flight` requests
// and `max_bytes_in_flight` bytes in the server (queued, being read or
// being sent), `max_per_connection` and `max_bytes_per_connection` per
// peer; beyond, the answer is kBusy (the asking node reads SOURCE). A
// buffer is the size of the range asked, allocated when its read starts.
// The asker's deadline travels with the request: a request whose deadline
// has passed is not read, and the provider gives up at it.
//
// A kIfResident request for a chunk the provider neither holds nor is
// promoting is answered kNotResident at once, on the progress thread. A
// kOffer (a chunk its peer read from SOURCE for want of a copy here; an
// eager one may be a session's first message) is
// received within the same budgets (a rendezvous one into a buffer of the
// server's), opened (its
// tag over header, path and bytes), and handed to ChunkProvider::Adopt on
// a pool thread (an eager body copied first); it is never answered. One over budget is dropped
// unread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/executor.h"
#include "tiering/base/latency_histogram.h"
#include "tiering/base/mutex.h"
#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/server/chunk_provider.h"
#include "tiering/peers/server/peer_door.h"
#include "tiering/peers/transport/buffer_pool.h"
#include "tiering/peers/transport/peer_transport.h"
#include "tiering/peers/transport/ucx_options.h"

namespace tierfs {

struct PeerServerOptions {
  std::string listen_host = "127.0.0.1";
  uint16_t port = 0;              // 0: any free port (tests); the daemon sets the job's port
  int inherited_fd = -1;          // a listening socket handed to the daemon (LISTEN_FDS)
  uint64_t chunk_size = 8 << 20;  // this node's; requests for another size get kBadRequest
  unsigned threads = 4;           // provider calls at once
  size_t max_in_flight = 32;      // requests queued, being read or sent; beyond: kBusy
  size_t max_per_connection = 16;
  uint64_t max_bytes_in_flight = 256 << 20;  // the bytes of those requests
  uint64_t max_bytes_per_connection = 64 << 20;
  size_t max_connections = 1024;  // sessions; beyond, the least recently heard one is dropped
  std::chrono::milliseconds hello_timeout{2000};  // the whole handshake
  size_t max_handshakes = 1024;  // connections in their handshake, per class (peer_door.h)
  size_t max_handshakes_per_address = 8;
  // An authenticated session its client has not used yet is dropped after
  // this (the client's first message, a kPing, follows the handshake).
  std::chrono::milliseconds session_ttl{10000};
  // A data answer the peer has not taken by then cuts the connection off,
  // so a stalled peer cannot hold the server's slots.
  std::chrono::milliseconds send_timeout{30000};
  // A session nothing came from for this long is dropped (its client pings
  // while it holds it: every second at most).
  std::chrono::milliseconds idle_timeout{30000};
  UcxOptions ucx;
};

struct PeerServerCounters {
  std::atomic<uint64_t> connections{0};           // sessions taken up
  std::atomic<uint64_t> rejected_connections{0};  // over max_connections, none evictable
  std::atomic<uint64_t> evicted_sessions{0};      // dropped to make room (least recently heard)
  std::atomic<uint64_t> open{0};                  // gauge
  std::atomic<uint64_t> forged{0};    // messages that do not open under their session's key
  std::atomic<uint64_t> replayed{0};  // ... that open, with a sequence number seen before
  std::atomic<uint64_t> send_timeouts{0};
  std::atomic<uint64_t> garbage{0};         // undecodable or misplaced messages
  std::atomic<uint64_t> bad_version{0};     // ... of which another wire version
  std::atomic<uint64_t> stray{0};           // messages naming no session: dropped
  std::atomic<uint64_t> pings{0};           // kPing answered
  std::atomic<uint64_t> byes{0};            // sessions closed by their client
  std::atomic<uint64_t> idle_dropped{0};    // sessions dropped: silent for idle_timeout
  std::atomic<uint64_t> forgotten_told{0};  // messages answered kUnknownSession
  std::atomic<uint64_t> leaving_told{0};    // sessions told kLeaving at Stop
  std::atomic<uint64_t> replies_gone{0};    // sessions whose reply endpoint went (watch ended)
  std::atomic<uint64_t> unwatched{0};       // ... of which the peer refused the watch
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> served_chunks{0}, served_bytes{0};
  std::atomic<uint64_t> busy{0};            // answered kBusy
  std::atomic<uint64_t> expired{0};         // the asker's deadline passed before the read
  std::atomic<uint64_t> errors{0};          // answered another error (provider or bad chunk size)
  std::atomic<uint64_t> not_resident{0};    // kIfResident requests answered kNotResident
  std::atomic<uint64_t> offers{0};          // kOffer messages received and opened
  std::atomic<uint64_t> adopted{0};         // ... whose chunk the provider kept
  std::atomic<uint64_t> offers_refused{0};  // ... dropped: over budget, or the provider declined
  std::atomic<uint64_t> bytes_in_flight{0}, peak_bytes_in_flight{0};  // gauges
  LatencyHistogram serve_latency;  // request arrival to answer sent
};

class PeerServer {
 public:
  // A transport in place of a failed one, made within `limit`.
  using TransportMaker =
      std::function<Result<std::unique_ptr<PeerTransport>>(std::chrono::milliseconds limit)>;

  // `auth` and `provider` must outlive the server. Over UCX (UcxTransport,
  // options.ucx); an error if UCX cannot start.
  static Result<std::unique_ptr<PeerServer>> Make(PeerAuth* auth, ChunkProvider* provider,
                                                  PeerServerOptions options);
  // Over `transport` (not started), replaced by what `remake` makes after
  // it failed (RestartTransport).
  static Result<std::unique_ptr<PeerServer>> Make(PeerAuth* auth, ChunkProvider* provider,
                                                  PeerServerOptions options,
                                                  std::unique_ptr<PeerTransport> transport,
                                                  TransportMaker remake);
  ~PeerServer();  // Stop()

  // Listens (or keeps trying, if the port is taken: listening() and port()
  // tell) and starts serving. An error if it cannot listen at all.
  Status Start();
  // Closes every connection and waits for the provider calls running. Idempotent.
  void Stop();

  uint16_t port() const { return door_->port(); }
  bool listening() const { return door_->listening(); }
  const PeerServerCounters& counters() const { return counters_; }
  const PeerDoorCounters& door() const { return door_->counters(); }
  uint64_t refused(AuthVerdict v) const { return door().refused[static_cast<int>(v)].load(); }
  // UCX failed under this server (an abort contained on its progress
  // thread): it serves nobody until RestartTransport. Thread-safe.
  bool transport_failed() const { return transport()->wedged(); }
  // A new transport (a UCX context and worker) in place of a failed one,
  // made within `limit` (peer_server_restart.cc): the failed one and its
  // thread are left as they are, never called again, with whatever they
  // held; the sessions on it are dropped (their peers connect again
  // through the door, which keeps its socket and names the new worker from
  // now on). Thread-safe; an error if stopped or UCX cannot start.
  Status RestartTransport(std::chrono::milliseconds limit = std::chrono::seconds(10));
  uint64_t transport_restarts() const { return restarts_.load(); }
  // Tests: the transport fails as after a contained abort (PeerTransport::WedgeForTest).
  void WedgeForTest() { transport()->WedgeForTest(); }
  // The "server" group: the counters above, the door's, and bytes served per peer.
  void VisitCounters(CounterVisitor& v) const;

 private:
  PeerServer(PeerAuth* auth, ChunkProvider* provider, PeerServerOptions options,
             std::string worker_address, TransportMaker remake);
  // Makes `transport` this server's: its handler set, kept, current.
  Status Attach(std::unique_ptr<PeerTransport> transport) REQUIRES(restart_mu_);
  PeerTransport* transport() const { return transport_.load(std::memory_order_acquire); }
  struct Connection;
  struct Forgotten;
  struct Job;
  struct OfferJob;
  // A kOffer: opened (Open), budgeted and adopted; a rendezvous one is
  // budgeted, received, then opened (progress thread).
  PeerTransport::Receipt OnOffer(const PeerMessage& m, const PeerTransport::Message& in);
  // Whether an offer's body (the path, then the bytes) opens under a session's keys.
  static std::function<bool(const SessionKeys&)> OfferOpener(const OfferJob& job, const char* body);
  // An opened, budgeted offer handed to the provider; its budget given back.
  void AdoptOffer(Connection& c, const std::shared_ptr<OfferJob>& job, const char* body);
  // Takes (or gives back) `bytes` of the budgets and a slot, for `session`.
  bool Reserve(Connection& c, uint64_t bytes);
  // Of transport `epoch`: nothing if that transport has failed since
  // (its budgets were reset).
  void Unreserve(uint64_t session, uint64_t bytes, uint64_t epoch);
  PeerTransport::Receipt OnMessage(const PeerTransport::Message& in);
  // Takes session m.session from the door if `open` accepts its keys (the
  // message's tag), answering on `reply`; null (counted) if not.
  Connection* TakeSession(const PeerMessage& m, PeerEndpoint reply,
                          const std::function<bool(const SessionKeys&)>& open);
  // The one way a message (a request, a ping, a bye, an offer) opens its
  // session: the session it names, taken from the door if new (answering on
  // `reply`), if `open` accepts the session's keys (the message's tag) and
  // its sequence number is new; null (counted, `what` logged) if not.
  Connection* Open(const PeerMessage& m, PeerEndpoint reply,
                   const std::function<bool(const SessionKeys&)>& open, const char* what);
  void OnRequest(Connection& c, const PeerMessage& m, std::string_view path);
  void Run(const std::shared_ptr<Job>& job);
  // Sends a job's bytes or error to session `session`, if it is still there.
  void Answer(uint64_t session, std::shared_ptr<Job> job);
  void SendError(Connection& c, uint64_t request_id, WireError error);
  void SendBare(Connection& c, MsgType type, uint64_t request_id);
  // If `m` names a session dropped here and `open` accepts it under that
  // session's kept keys: answers kUnknownSession on `reply`, true.
  bool TellForgotten(const PeerMessage& m, PeerEndpoint reply,
                     const std::function<bool(const SessionKeys&)>& open);
  // The watch on reply endpoint `ep` ended (`refused`, `why`: Watch's):
  // every session answering on it forgets it, and is dropped at the next tick.
  void ReplyGone(PeerEndpoint ep, bool refused, const std::string& why);
  // Garbage or forgery: counted, logged, closed.
  void CutOff(Connection& c, const char* why);
  // `remember`: keep its keys to tell its client (kUnknownSession).
  void Drop(uint64_t session, bool remember = true);
  // Send deadlines and idle sessions, every 10 ms at most.
  void Tick();
  void CountServed(const std::string& peer, uint64_t bytes);

  PeerAuth* const auth_;
  ChunkProvider* const provider_;
  const PeerServerOptions options_;
  const TransportMaker remake_;
  // The transport in use, and every transport this server made. A failed
  // one is kept, never called again nor destroyed before the server: UCX
  // may still hold pointers into it.
  std::atomic<PeerTransport*> transport_{nullptr};
  // Serialises Stop and RestartTransport; guards transports_. Taken before
  // any other lock of the server's.
  Mutex restart_mu_;
  std::vector<std::unique_ptr<PeerTransport>> transports_ GUARDED_BY(restart_mu_);
  std::atomic<uint64_t> restarts_{0};
  bool stopped_ GUARDED_BY(restart_mu_) = false;
  TaskPool pool_;
  BufferPool buffers_;
  std::unique_ptr<PeerDoor> door_;
  PeerServerCounters counters_;

  // Progress thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> by_session_;
  std::unordered_map<uint64_t, Forgotten> forgotten_;  // at most kForgotten, oldest first out:
  std::deque<uint64_t> forgotten_order_;
  size_t in_flight_ = 0;  // requests queued, being read or sent
  // Transports started so far (0: the first). A request or offer budgeted
  // under an earlier one is not given back to this one's budgets.
  uint64_t epoch_ = 0;
  std::chrono::steady_clock::time_point next_tick_;

  struct Served {
    uint64_t chunks = 0, bytes = 0;
  };
  mutable Mutex served_mu_;  // guards served_. A leaf lock.
  std::map<std::string, Served> served_
      GUARDED_BY(served_mu_);  // by authenticated peer name, at most max_connections
};

}  // namespace tierfs
