// PeerConnections: the connection to each of the job's peers, one state
// machine each, on the progress thread. It decides with the pure functions
// of link_schedule.h and PeerLiveness, dials through a PeerDialer, and acts
// through a PeerTransport; PeerClient asks and answers on top of it.
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
// of silence (peer_connections_stall.cc). A peer that never came up is
// dead only once `grace` has passed since Start, so a node that starts a
// little late does not move the job's homes.
//
// Threading: every method but the marked ones runs on the progress thread
// (or, in Stop's last step, after it has ended). The links' LinkStatus and
// slots are read by any thread (peer_link.h).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tiering/peers/client/link_schedule.h"
#include "tiering/peers/client/peer_dialer.h"
#include "tiering/peers/client/peer_link.h"
#include "tiering/peers/transport/peer_transport.h"

namespace tierfs {

class PeerConnections {
 public:
  using Clock = std::chrono::steady_clock;
  // The time, for every decision (a test's own clock, or steady_clock's).
  using Now = std::function<Clock::time_point()>;

  // `dialer` must outlive this; the transport is set before Start (SetTransport).
  PeerConnections(
      const PeerClientOptions& options, PeerDialer* dialer, Now now = [] { return Clock::now(); });

  // --- Any thread ---
  size_t size() const { return links_.size(); }
  PeerLink& link(size_t peer) { return *links_[peer]; }
  const PeerLink& link(size_t peer) const { return *links_[peer]; }
  // The transport in use: set before Start and by a restart (under the
  // client's restart_mu_, while no progress thread runs this).
  PeerTransport* transport() const { return transport_.load(std::memory_order_acquire); }
  void SetTransport(PeerTransport* transport) {
    transport_.store(transport, std::memory_order_release);
  }
  size_t open() const { return open_.load(); }  // up or connecting
  bool stopped() const { return stopped_.load(); }
  // From now on nothing connects and nothing is logged of going down;
  // true if it was so already.
  bool SetStopped() { return stopped_.exchange(true); }
  // A request id: pings and requests share them, so an answer's id names one.
  uint64_t NextRequestId() { return next_request_++; }

  // --- Progress thread ---
  // The grace counts from here; with connect_at_start every link is down,
  // due now (the first Tick connects it).
  void Start();
  // Every link's next step (link_schedule.h), at most every 10 ms.
  void Tick();
  // A Fetch waits for `l` to come up: an idle link is connected, one that
  // is neither idle nor connecting wakes its waiters.
  void Asked(PeerLink& l);
  // The handshake on the dialer, then the endpoint here. At most
  // max_connections are open: beyond, the least recently used one with
  // nothing in flight is closed first; if none can be, `l` stays idle and
  // its waiters read SOURCE.
  void Connect(PeerLink& l);
  // The connection ends; `dead`: the peer is no home until it is up again.
  void Down(PeerLink& l, const std::string& why, bool dead);
  // Closes an up connection by agreement (kBye): idle, not dead.
  void Close(PeerLink& l);
  // A kPing on an up connection.
  void Ping(PeerLink& l);
  // A message from `l` authenticated: it is alive (and no longer stalled).
  void Heard(PeerLink& l);
  // An answer to this connection's last ping: a round trip measured.
  void OnPong(PeerLink& l);
  // Bytes came: a later failure is retried soon, and it is not slow for long.
  void Answering(PeerLink& l);
  // A Fetch sent on connection `generation` was not answered in time: the
  // peer is slow (skipped for its slow backoff, which doubles) and pinged.
  void TimedOut(PeerLink& l, uint64_t generation);
  // Skipped by Fetches for its slow backoff from `now`, which doubles.
  void MarkSlow(PeerLink& l, Clock::time_point now);
  // Its server said it is leaving the job (kLeaving): down quietly, gone.
  void Leaving(PeerLink& l);
  // It answered "unknown session" (it dropped this one): idle, its Fetches
  // end -ECONNRESET, and connected again at once if any was waiting.
  void Forgotten(PeerLink& l);
  // The transport says `ep` failed: a timeout is a slow peer, else a dead one.
  void OnEndpointError(PeerEndpoint ep, bool timed_out, const std::string& why);
  // The link whose session is `session`, or null.
  PeerLink* BySession(uint64_t session) const;
  // Ends request `p` of `l` with `result` (once) and wakes its caller.
  void Complete(PeerLink& l, const std::shared_ptr<PeerRequest>& p, ssize_t result);
  // Stop's work on the progress thread: one log line for the job, kBye to
  // every peer up (its server drops the session), then every link down.
  void Shutdown();
  // No connection is up without having been answered on (its peer may
  // still be wiring up its reply endpoint to this transport).
  bool Settled() const;
  // After the progress thread has ended: every request ends with `error`.
  void EndAll(ssize_t error);
  // After a failed transport's thread stopped for good and before the new
  // one starts (this thread alone on this state): every connection
  // forgotten, its requests ended -ECONNRESET (those the failed transport
  // was receiving into are appended to `stranded`, never reused), and the
  // links that were up or connecting made again at the next tick.
  void ForgetTransport(std::vector<std::shared_ptr<PeerRequest>>* stranded);

 private:
  // Forgets `l`'s connection (endpoint, keys, requests not receiving, which
  // end with `error`) and puts it in state `next`; returns the state it was in.
  LinkState Forget(PeerLink& l, LinkState next, ssize_t error = -EHOSTDOWN);
  // The handshake's result, back on the progress thread.
  void OnDialed(PeerLink& l, uint64_t generation, DialResult dialed);
  // It is up on `session`'s keys, at `ep`.
  void Up(PeerLink& l, ClientSession& session, PeerEndpoint ep);
  // The job's end in one line: peers that left, were lost, are still there.
  void LogEnd();
  // The state changed: wake the Fetches waiting for a connection.
  static void Signal(PeerLink& l) { l.slots.NotifyAll(); }

  // peer_connections_stall.cc: a peer that answers nothing.
  // Ends `l`'s requests still waiting for an answer (not those receiving
  // one) with `error`; returns how many.
  size_t EndWaiting(PeerLink& l, ssize_t error);
  // Ends the waiting fetches of a peer that answers nothing (see above).
  void CheckStall(PeerLink& l, Clock::time_point now);
  // It answers again: no longer stalled nor slow.
  void EndStall(PeerLink& l);
  // Stalled, wanted and silent for its silence bound: dropped, made afresh.
  void Redial(PeerLink& l, Clock::time_point now);
  // Redialed, and silent for less than dead_after: a failed connect is no death.
  bool SilentButNotDead(const PeerLink& l, Clock::time_point now) const;
  // Ends the requests hedges left behind once their deadline has passed.
  void EndAbandoned(PeerLink& l, Clock::time_point now);
  // Wanted by a read within the last second.
  static bool Wanted(const PeerLink& l, Clock::time_point now);
  // A link's clocks, for its next step (link_schedule.h).
  static UpLinkClocks UpClocks(const PeerLink& l, Clock::time_point now);
  static DownLinkClocks DownClocks(const PeerLink& l, Clock::time_point now);
  void TickDown(PeerLink& l, Clock::time_point now, bool grace_over);
  void TickUp(PeerLink& l, Clock::time_point now);
  // A duration in whole milliseconds, for a log line.
  static long long Ms(Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  }

  const PeerClientOptions& options_;
  PeerDialer* const dialer_;
  const Now now_;
  std::vector<std::unique_ptr<PeerLink>> links_;
  std::atomic<PeerTransport*> transport_{nullptr};
  std::atomic<bool> stopped_{false};
  std::atomic<size_t> open_{0};  // up or connecting (written on the progress thread)
  std::atomic<uint64_t> next_request_{1};
  std::unordered_map<PeerEndpoint, PeerLink*> by_ep_;   // progress thread only
  std::unordered_map<uint64_t, PeerLink*> by_session_;  // progress thread only
  Clock::time_point next_tick_;                         // progress thread only
  Clock::time_point started_at_;                        // Start(): the grace counts from here
};

}  // namespace tierfs
