// PeerConnections: the connections to the job's peers, as a table on the
// progress thread. Each peer's is a PeerConnection (peer_connection.h: its
// state machine, liveness and ways down); the table makes them: it ticks
// each, dials a handshake through a PeerDialer and opens the endpoint
// through a PeerTransport, keeps at most max_connections open (beyond,
// the least recently used one with nothing in flight is closed first),
// and finds a connection by its endpoint (a transport error) or its
// session (a message). PeerClient asks and answers on top of it.
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

#include "tiering/peers/client/peer_connection.h"
#include "tiering/peers/client/peer_dialer.h"
#include "tiering/peers/client/peer_link.h"
#include "tiering/peers/transport/peer_transport.h"

namespace tierfs {

class PeerConnections final : private ConnectionTable {
 public:
  using Clock = std::chrono::steady_clock;
  // The time, for every decision (a test's own clock, or steady_clock's).
  using Now = std::function<Clock::time_point()>;

  // `dialer` must outlive this; the transport is set before Start (SetTransport).
  PeerConnections(
      const PeerClientOptions& options, PeerDialer* dialer, Now now = [] { return Clock::now(); });

  // --- Any thread ---
  size_t size() const { return connections_.size(); }
  PeerConnection& connection(size_t peer) { return *connections_[peer]; }
  PeerLink& link(size_t peer) { return connections_[peer]->link(); }
  const PeerLink& link(size_t peer) const { return connections_[peer]->link(); }
  // The transport in use: set before Start and by a restart (under the
  // client's restart_mu_, while no progress thread runs this).
  PeerTransport* transport() const override { return transport_.load(std::memory_order_acquire); }
  void SetTransport(PeerTransport* transport) {
    transport_.store(transport, std::memory_order_release);
  }
  size_t open() const { return open_.load(); }  // up or connecting
  bool stopped() const override { return stopped_.load(); }
  // From now on nothing connects and nothing is logged of going down;
  // true if it was so already.
  bool SetStopped() { return stopped_.exchange(true); }
  // A request id: pings and requests share them, so an answer's id names one.
  uint64_t NextRequestId() override { return next_request_++; }

  // --- Progress thread ---
  // The grace counts from here; with connect_at_start every link is down,
  // due now (the first Tick connects it).
  void Start();
  // Every connection's next step (link_schedule.h), at most every 10 ms.
  void Tick();
  // A Fetch waits for `c` to come up: an idle one is connected, one that
  // is neither idle nor connecting wakes its waiters.
  void Asked(PeerConnection& c);
  // The handshake on the dialer, then the endpoint here. At most
  // max_connections are open: beyond, the least recently used one with
  // nothing in flight is closed first; if none can be, `c` stays idle and
  // its waiters read SOURCE.
  void Connect(PeerConnection& c) override;
  // The transport says `ep` failed: a timeout is a slow peer, else a dead one.
  void OnEndpointError(PeerEndpoint ep, bool timed_out, const std::string& why);
  // The connection whose session is `session`, or null.
  PeerConnection* BySession(uint64_t session) const;
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
  // ConnectionTable: what a connection needs of this table.
  Clock::time_point Time() const override { return now_(); }
  void Unlist(PeerEndpoint ep) override { by_ep_.erase(ep); }
  void UnlistSession(uint64_t session) override { by_session_.erase(session); }
  void Closed() override { --open_; }

  // The handshake's result, back on the progress thread.
  void OnDialed(PeerConnection& c, uint64_t generation, DialResult dialed);
  // It is up on `session`'s keys, at `ep`.
  void Up(PeerConnection& c, ClientSession& session, PeerEndpoint ep);
  // The job's end in one line: peers that left, were lost, are still there.
  void LogEnd();

  const PeerClientOptions& options_;
  PeerDialer* const dialer_;
  const Now now_;
  std::vector<std::unique_ptr<PeerConnection>> connections_;
  std::atomic<PeerTransport*> transport_{nullptr};
  std::atomic<bool> stopped_{false};
  std::atomic<size_t> open_{0};  // up or connecting (written on the progress thread)
  std::atomic<uint64_t> next_request_{1};
  std::unordered_map<PeerEndpoint, PeerConnection*> by_ep_;   // progress thread only
  std::unordered_map<uint64_t, PeerConnection*> by_session_;  // progress thread only
  Clock::time_point next_tick_;                               // progress thread only
  Clock::time_point started_at_;                              // Start(): the grace counts from here
};

}  // namespace tierfs
