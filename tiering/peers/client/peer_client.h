// PeerClient: asks the job's other nodes for chunks.
//
// One connection per peer, opened on first need on a pool thread by the
// TCP handshake (peer_handshake.h: the server speaks first, both sides
// prove who they are with MUNGE, keys are derived for this connection)
// and then carried by UCX to the worker address the server gave. Its first
// message is a kPing, so the server holds the session from then on.
//
//   idle --(Fetch)--> connecting --(handshake done)--> up --(unused idle_close, or
//    ^                   |                              |    over max_connections: kBye)--> idle
//    |                   v                              |
//    |                 down <---------------------------+ transport error, silent for
//    |     (retry_at: backoff retry_min..retry_max)        dead_after, cut off, or an
//    |                   |                                 authenticated "unknown session"
//    +-------------------+ (down -> connecting)            (then retried at once)
//
// Liveness is not speed. While up, a peer is pinged when nothing came from
// it for a heartbeat (dead_after / 4, at most 1 s); one silent for
// dead_after, whose transport fails, or that breaks the protocol is
// marked dead: JobPeers then homes its chunks elsewhere. A Fetch that times
// out marks the peer slow: Fetches skip it (-EBUSY at once: the caller
// reads SOURCE) for slow_backoff (retry_min, doubling to retry_max; reset
// by an answer with bytes), but its chunks keep their home. A peer with
// fetches waiting that answers nothing, not even a ping, for a stall time
// (eight round trips, or one and four deviations; from max(250 ms,
// dead_after / 40) to dead_after / 4) is stopped or cut
// off: those fetches end -ETIMEDOUT at once and it is slow the same way;
// one that answers pings is working on them (a home promoting from a slow
// PFS) and they wait to their deadline. A stalled peer that reads want and
// that answers nothing for twice its stall time (from 1 s to dead_after / 2)
// has its connection dropped and made afresh, resumed by its ticket: after
// a cut, fresh SYNs get through as soon as the link is back, where the old
// connection waits for TCP's backed-off resend; not dead before dead_after
// of silence (peer_client_stall.cc). A peer that
// never came up is dead only once `grace` has passed since Start, so a
// node that starts a little late does not move the job's homes.
//
// A Fetch waits for the first connect of an idle link, never for a retry
// after a failure (it reads SOURCE meanwhile).
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
#include <unordered_map>
#include <vector>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/executor.h"
#include "tiering/base/latency_histogram.h"
#include "tiering/base/mutex.h"
#include "tiering/peers/client/offer_budget.h"
#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/transport/buffer_pool.h"
#include "tiering/peers/transport/ucx_worker.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {

struct UpLinkClocks;
struct DownLinkClocks;

struct PeerAddress {
  std::string name;  // as in the peer's own PeerIdentity
  std::string host;  // a name or an address
  uint16_t port = 0;
};

struct PeerClientOptions {
  std::vector<PeerAddress> peers;                   // the other nodes of the job
  std::chrono::milliseconds connect_timeout{3000};  // the whole handshake
  std::chrono::milliseconds retry_min{100}, retry_max{5000};
  std::chrono::milliseconds dead_after{10000};    // silence (no answer to pings) that is death
  std::chrono::milliseconds grace{60000};         // a peer never up is not dead before this
  std::chrono::milliseconds idle_close{1800000};  // an open connection unused this long is closed
  // Open (up or connecting) at once; beyond, the least used idle one closes.
  size_t max_connections = 1024;
  bool connect_at_start = false;  // connect to every peer at Start, not on first need
  size_t max_in_flight = 8;       // requests outstanding per peer
  // Where handshakes come from: a port of this range (below 1024) when
  // this process may bind one (root); SourcePort::kAny: any port.
  SourcePort source_port = SourcePort::kReservedIfAllowed;
  // Offers being sent at once, in all, and their bytes: beyond, an offer is dropped.
  size_t max_offers = 16;
  uint64_t max_offer_bytes = uint64_t{64} << 20;
  // A hedged Fetch reads SOURCE too once its peer has not begun to answer
  // for the p99 of that peer's answers, within [hedge_min, hedge_max]
  // (hedge_max while fewer than 16 answers are measured).
  std::chrono::milliseconds hedge_min{50}, hedge_max{500};
  // While reads want a peer that is stalled or down, it is pinged (stalled)
  // or connected to (down) this often, so that it is asked again as soon
  // as it answers; a connect's TCP part then has probe_connect at most.
  std::chrono::milliseconds probe{100}, probe_connect{1000};
  UcxWorker::Options ucx;
};

// The "up" and "down" gauges; JobPeers reports them too when it has no client.
inline constexpr About kPeersUp{"Peers of the job this node is connected to."};
inline constexpr About kPeersDown{"Peers of the job this node is not connected to."};

struct PeerLinkCounters {
  std::atomic<uint64_t> fetched_chunks{0}, fetched_bytes{0};
  std::atomic<uint64_t> timeouts{0};          // no answer by the caller's deadline
  std::atomic<uint64_t> ups{0}, downs{0};     // state changes
  std::atomic<uint64_t> connect_failures{0};  // attempts that did not end up
  std::atomic<uint64_t> resumed{0};           // ups by a ticket: no MUNGE credential
  std::atomic<uint64_t> resume_refused{0};    // tickets the peer refused: a full handshake followed
  std::atomic<uint64_t> refused{0};           // authentication failed either way
  std::atomic<uint64_t> garbage{0};           // undecodable or unexpected answers: cut off
  std::atomic<uint64_t> forged{0};            // answers that do not authenticate: cut off
  std::atomic<uint64_t> replayed{0};          // ... that do, with a sequence number seen before
  std::atomic<uint64_t> errors{0};            // error answers (kStale, kNotFound, kIo, ...)
  std::atomic<uint64_t> busy{0};              // kBusy answers, and no slot by the deadline
  std::atomic<uint64_t> skipped{0};           // Fetch while the peer was not up, or slow
  std::atomic<uint64_t> late{0};              // answers to requests their caller gave up on
  std::atomic<uint64_t> stalls{0};            // silent with requests waiting: read here meanwhile
  std::atomic<uint64_t> closed_idle{0};       // connections closed unused (kBye)
  std::atomic<uint64_t> resets{0};            // "unknown session" answers: connected again
  std::atomic<uint64_t> connect_us{0};        // time to connect, summed over the ups
  std::atomic<uint64_t> latency_us{0};        // summed over the fetched chunks
  std::atomic<uint64_t> not_resident{0};      // kIfResident fetches it answered kNotResident
  std::atomic<uint64_t> offered{0};           // chunks offered to it
  std::atomic<uint64_t> offers_dropped{0};    // ... not sent: not up, or too many in flight
  std::atomic<uint64_t> left{0};              // times it said it was leaving the job (kLeaving)
  std::atomic<uint64_t> hedges{0};            // hedged Fetches that read SOURCE too
  std::atomic<uint64_t> hedges_won{0};        // ... and had SOURCE's bytes before the peer's
  std::atomic<uint64_t> hedges_lost{0};       // ... the peer had answered first: SOURCE's wasted
  std::atomic<uint64_t> hedge_bytes{0};       // bytes those hedges read from SOURCE
  std::atomic<uint64_t> probes{0};            // pings and connects made while reads wanted it
  // Connections dropped and made afresh: stalled and silent while reads wanted it.
  std::atomic<uint64_t> reconnects_after_silence{0};
};

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
  // Closes the connections; Fetches still waiting return -ESHUTDOWN. Idempotent.
  void Stop();

  size_t size() const { return links_.size(); }
  const std::string& name(size_t peer) const;
  bool up(size_t peer) const;
  // Dead: not to be a home (see above). A peer not yet asked is not dead.
  bool dead(size_t peer) const;
  // Connections up or being made, now.
  size_t open_connections() const { return open_.load(); }
  const PeerLinkCounters& counters(size_t peer) const;
  uint64_t stray() const { return stray_.load(); }  // messages from no known endpoint

  // Fetches chunk `ref` from peer `peer` into `dest` (ref.length() bytes).
  // Returns ref.length(), or -errno: -EHOSTDOWN (not up: not asked),
  // -ETIMEDOUT (no answer by `deadline`: the peer is now slow), -EBUSY (no
  // slot by the deadline, the peer is busy, or slow), -ENOENT/-ESTALE/-EINVAL/-EIO
  // (the peer's answer), -EPROTO (the peer broke the protocol: cut off),
  // -EBADMSG (the answer does not authenticate: cut off), -ECONNRESET
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
  bool transport_failed() const { return ucx()->wedged(); }
  // A new UCX context and worker in place of a failed one, made within
  // `limit` (peer_client_restart.cc): the failed worker and its thread are
  // left as they are, never called again; the requests waiting on it end
  // (-ECONNRESET: their callers read SOURCE); the connections that were up
  // are made again at once (resumed by their tickets), the others as
  // before. Thread-safe; an error if stopped or UCX cannot start.
  Status RestartTransport(std::chrono::milliseconds limit = std::chrono::seconds(10));
  uint64_t transport_restarts() const { return restarts_.load(); }
  // Tests: the transport fails as after a contained abort (UcxWorker::WedgeForTest).
  void WedgeForTest() { ucx()->WedgeForTest(); }

  // Latency of the fetches that returned the bytes, all peers.
  const LatencyHistogram& latency() const { return latency_; }
  // Peers up and down, and the list "remote": each peer's state and counters.
  void VisitCounters(CounterVisitor& v) const;

 private:
  PeerClient(PeerAuth* auth, PeerClientOptions options);
  // Makes `ucx` this client's transport: its handlers set, kept, current.
  Status Attach(std::unique_ptr<UcxWorker> ucx) REQUIRES(restart_mu_);
  // After the failed worker's thread stopped for good and before the new
  // one starts (this thread alone on the progress thread's state): every
  // connection forgotten, its requests ended (peer_client_restart.cc).
  void ForgetTransport() REQUIRES(restart_mu_);
  UcxWorker* ucx() const { return ucx_.load(std::memory_order_acquire); }
  // Handshakes at once: each mostly waits (the network, munged), and at
  // the start of an epoch a node may connect to hundreds of peers.
  static constexpr unsigned kHandshakeThreads = 8;
  struct Pending;
  struct Link;
  enum State : int { kDown = 0, kConnecting = 1, kUp = 2, kIdle = 3 };

  // Progress thread.
  ucs_status_t OnMessage(const void* header, size_t header_size, void* data, size_t size,
                         const ucp_am_recv_param_t* param);
  // A kData answer for `p`: copied, or received, into p->sealed.
  ucs_status_t OnData(Link& l, const std::shared_ptr<Pending>& p, const void* header,
                      size_t header_size, uint64_t seq, void* data,
                      const ucp_am_recv_param_t* param);
  void Send(const std::shared_ptr<Pending>& p);
  void Complete(Link& l, const std::shared_ptr<Pending>& p, ssize_t result);
  // The connection's lifecycle (peer_client_link.cc).
  void Tick();
  // The job's end in one line: peers that left, were lost, are still there.
  void LogEnd();
  void Connect(Link& l);
  // The connection ends; `dead`: the peer is no home until it is up again.
  void Down(Link& l, const std::string& why, bool dead);
  // Closes an up connection by agreement (kBye): idle, not dead.
  void Close(Link& l);
  // Forgets `l`'s connection (endpoint, keys, requests not receiving) and
  // puts it in state `next`; returns the state it was in.
  // Its requests end with `error`.
  int Forget(Link& l, int next, int error = -EHOSTDOWN);
  void Ping(Link& l);
  void OnPong(Link& l);  // a round trip measured
  // Skipped by Fetches for its slow backoff from `now`, which doubles.
  void MarkSlow(Link& l, std::chrono::steady_clock::time_point now);
  // Ends `l`'s requests still waiting for an answer (not those receiving
  // one) with `error`; returns how many.
  size_t EndWaiting(Link& l, ssize_t error);
  // Ends the waiting fetches of a peer that answers nothing (see above).
  void CheckStall(Link& l, std::chrono::steady_clock::time_point now);
  // A message from `l` authenticated: it is alive (and no longer stalled).
  void Heard(Link& l);
  // It answers again: no longer stalled nor slow.
  void EndStall(Link& l);
  // Stalled, wanted and silent for its silence bound: dropped, made afresh.
  void Redial(Link& l, std::chrono::steady_clock::time_point now);
  // Redialed, and silent for less than dead_after: a failed connect is no death.
  bool SilentButNotDead(const Link& l, std::chrono::steady_clock::time_point now) const;
  // The state changed: wake the Fetches waiting for a connection.
  void Signal(Link& l);
  // Up to the caller's deadline for a connection to an idle or connecting
  // peer to come up; true if it is up.
  bool AwaitUp(Link& l, Deadline deadline);
  // The error answer `m` (authenticated) for `l`.
  void OnError(Link& l, const PeerMessage& m);

  // One request to `l` (a slot held) and its answer, opened into `dest`.
  ssize_t Ask(Link& l, const ChunkRef& ref, char* dest, Deadline deadline, uint16_t flags,
              Hedge* hedge);
  ssize_t Wait(Link& l, const std::shared_ptr<Pending>& p, Deadline deadline);
  // Races SOURCE (hedge) with `p` once `l` has not begun to answer for its
  // hedge time: true if SOURCE's bytes are in `dest` (*result their count).
  bool Race(Link& l, const std::shared_ptr<Pending>& p, char* dest, Hedge* hedge, ssize_t* result);
  // An answer to `p` began to arrive: its latency, for l's hedge time.
  void Answered(Link& l, const Pending& p);
  // The server said it is leaving the job (kLeaving): the link goes down quietly.
  void Leaving(Link& l);
  // Ends the requests hedges left behind once their deadline has passed.
  void EndAbandoned(Link& l, std::chrono::steady_clock::time_point now);
  // Wanted by a read within the last second.
  static bool Wanted(const Link& l, std::chrono::steady_clock::time_point now);
  // An up link's clocks, for its next step (link_schedule.h).
  static UpLinkClocks UpClocks(const Link& l, std::chrono::steady_clock::time_point now);
  static DownLinkClocks DownClocks(const Link& l, std::chrono::steady_clock::time_point now);
  ssize_t Open(Link& l, const std::shared_ptr<Pending>& p, char* dest);

  PeerAuth* const auth_;
  const PeerClientOptions options_;
  std::vector<std::unique_ptr<Link>> links_;
  // The transport: the worker in use, and every worker this client made.
  // A failed one is kept, never called again nor destroyed before the
  // client: UCX may still hold pointers into it.
  std::atomic<UcxWorker*> ucx_{nullptr};
  // Serialises Stop and RestartTransport; guards workers_ and stranded_.
  // Taken before any other lock of the client's.
  Mutex restart_mu_;
  std::vector<std::unique_ptr<UcxWorker>> workers_ GUARDED_BY(restart_mu_);
  // Requests a failed worker was receiving into: kept, buffers and all.
  std::vector<std::shared_ptr<Pending>> stranded_ GUARDED_BY(restart_mu_);
  std::atomic<uint64_t> restarts_{0};
  TaskPool pool_;
  std::shared_ptr<BufferPool> buffers_;  // answers' buffers, kept for reuse
  std::atomic<uint64_t> next_request_{1};
  std::atomic<uint64_t> stray_{0};
  OfferBudget offers_;  // offers being sent, in all
  // An offer sent or dropped: its buffer back, its budget released.
  void OfferDone(BufferPool::Buffer body, uint64_t bytes);
  LatencyHistogram latency_;
  std::unordered_map<ucp_ep_h, Link*> by_ep_;        // progress thread only
  std::unordered_map<uint64_t, Link*> by_session_;   // progress thread only
  std::chrono::steady_clock::time_point next_tick_;  // progress thread only
  std::atomic<bool> stopped_{false};
  std::atomic<size_t> open_{0};  // up or connecting (written on the progress thread)
  std::chrono::steady_clock::time_point started_at_;  // Start(): the grace counts from here
};

}  // namespace tierfs
