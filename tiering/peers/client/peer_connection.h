// PeerConnection: this node's connection to one peer of the job, a state
// machine on the progress thread. It owns the peer's PeerLink and carries
// out its steps: the ways down (a failure, kBye, the peer leaving or
// forgetting the session), pings and what they tell, slowness, stalls and
// redials, and its next step at each tick while up or down, decided by
// the pure functions of link_schedule.h and PeerLiveness. Its way up (the
// handshake on the dialer, then the endpoint) is its table's,
// PeerConnections (peer_connections.h), which it reaches through
// ConnectionTable alone.
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
// out marks the peer slow: Fetches skip it for slow_backoff (retry_min,
// doubling to retry_max; reset by an answer with bytes), but its chunks
// keep their home. A peer with fetches waiting that answers nothing, not
// even a ping, for its stall time (PeerLiveness: eight round trips, or
// one and four deviations, within [max(250 ms, dead_after / 40),
// dead_after / 4]) is stopped or cut off: those fetches end -ETIMEDOUT at
// once and it is slow the same way; one that answers pings is working on
// them (a home promoting from a slow PFS) and they wait to their deadline.
// A stalled peer that reads want and that answers nothing for its silence
// bound (twice its stall time, from 1 s to dead_after / 2) has its
// connection dropped and made afresh, resumed by its ticket: after a cut,
// fresh SYNs get through as soon as the link is back, where the old
// connection waits for TCP's backed-off resend; not dead before dead_after
// of silence (Redial). A peer that never came up is dead only once
// `grace` has passed since Start, so a node that starts a little late does
// not move the job's homes.
//
// Threading: every method runs on the progress thread (or, in Stop's last
// step, after it has ended). The link's LinkStatus and slots are read by
// any thread (peer_link.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "tiering/peers/client/link_schedule.h"
#include "tiering/peers/client/peer_client_options.h"
#include "tiering/peers/client/peer_link.h"
#include "tiering/peers/transport/peer_transport.h"

namespace tierfs {

class PeerConnection;

// What a PeerConnection needs of the table that holds it (PeerConnections),
// and nothing more: the clock, the transport, request ids, whether the
// client stopped, a connect within max_connections, and the table's
// bookkeeping, kept by each connection as it goes down (its count of
// connections open, the endpoints and sessions it finds them by).
// Progress thread.
class ConnectionTable {
 public:
  using Clock = std::chrono::steady_clock;

  // The time, for every decision.
  virtual Clock::time_point Time() const = 0;
  virtual PeerTransport* transport() const = 0;
  // Stopping: nothing connects, nothing is logged of going down.
  virtual bool stopped() const = 0;
  // A request id: pings and requests share them, so an answer's id names one.
  virtual uint64_t NextRequestId() = 0;
  // Connects `c` (idle or down), within max_connections.
  virtual void Connect(PeerConnection& c) = 0;
  // `ep` is no connection's any more: an error on it finds none.
  virtual void Unlist(PeerEndpoint ep) = 0;
  // `session` is no connection's any more: a message of it finds none.
  virtual void UnlistSession(uint64_t session) = 0;
  // A connection up or connecting is neither now: one fewer open.
  virtual void Closed() = 0;

 protected:
  ~ConnectionTable() = default;
};

class PeerConnection {
 public:
  using Clock = std::chrono::steady_clock;

  // Peer `index` of `options` (both must outlive this), in `table`.
  PeerConnection(size_t index, const PeerClientOptions& options, ConnectionTable* table);
  PeerConnection(const PeerConnection&) = delete;
  PeerConnection& operator=(const PeerConnection&) = delete;

  PeerLink& link() { return link_; }
  const PeerLink& link() const { return link_; }

  // The connection ends; `dead`: the peer is no home until it is up again.
  void Down(const std::string& why, bool dead);
  // Closes an up connection by agreement (kBye): idle, not dead.
  void Close();
  // A kPing on an up connection.
  void Ping();
  // A message from the peer authenticated: it is alive (and no longer stalled).
  void Heard();
  // An answer to this connection's last ping: a round trip measured.
  void OnPong();
  // Bytes came: a later failure is retried soon, and it is not slow for long.
  void Answering();
  // A Fetch sent on connection `generation` was not answered in time: the
  // peer is slow (skipped for its slow backoff, which doubles) and pinged.
  void TimedOut(uint64_t generation);
  // Skipped by Fetches for its slow backoff from `now`, which doubles.
  void MarkSlow(Clock::time_point now);
  // Its server said it is leaving the job (kLeaving): down quietly, gone.
  void Leaving();
  // It answered "unknown session" (it dropped this one): idle, its Fetches
  // end -ECONNRESET, and connected again at once if any was waiting.
  void Forgotten();
  // It answers again: no longer stalled nor slow.
  void EndStall();
  // Ends request `p` with `result` (once) and wakes its caller.
  void Complete(const std::shared_ptr<PeerRequest>& p, ssize_t result);
  // The state changed: wake the Fetches waiting for a connection.
  void Signal() { link_.slots.NotifyAll(); }

  // Its step at a tick (link_schedule.h), down (`grace_over`: since Start)
  // or up.
  void TickDown(Clock::time_point now, bool grace_over);
  void TickUp(Clock::time_point now);
  // Redialed, and silent for less than dead_after: a failed connect is no death.
  bool SilentButNotDead(Clock::time_point now) const;

 private:
  // Forgets the connection (endpoint, keys, requests not receiving, which
  // end with `error`) and puts it in state `next`; returns the state it was in.
  LinkState Forget(LinkState next, ssize_t error = -EHOSTDOWN);
  // Ends the requests still waiting for an answer (not those receiving
  // one) with `error`; returns how many.
  size_t EndWaiting(ssize_t error);
  // Ends the waiting fetches of a peer that answers nothing (see above).
  void CheckStall(Clock::time_point now);
  // Stalled, wanted and silent for its silence bound: dropped, made afresh.
  void Redial(Clock::time_point now);
  // Ends the requests hedges left behind once their deadline has passed.
  void EndAbandoned(Clock::time_point now);
  // Wanted by a read within the last second.
  bool Wanted(Clock::time_point now) const;
  // The link's clocks, for its next step (link_schedule.h).
  UpLinkClocks UpClocks(Clock::time_point now) const;
  DownLinkClocks DownClocks(Clock::time_point now) const;
  PeerTransport* transport() const { return table_.transport(); }
  // A duration in whole milliseconds, for a log line.
  static long long Ms(Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  }

  const PeerClientOptions& options_;
  ConnectionTable& table_;
  PeerLink link_;
};

}  // namespace tierfs
