// The state a PeerClient keeps per peer (PeerLink) and per Fetch
// (PeerRequest), private to tiering/peers/client. A link's state lives in
// three threading domains, one type each: LinkStatus (atomics any thread
// reads, and the Fetches' slots), FetchSlots (its own lock), and
// LinkProgress (the progress thread's alone: the connection's state
// machine, PeerConnection, and the requests it carries).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/mutex.h"
#include "tiering/peers/client/fetch_slots.h"
#include "tiering/peers/client/hedge_time.h"
#include "tiering/peers/client/peer_client_options.h"
#include "tiering/peers/client/peer_liveness.h"
#include "tiering/peers/secure/session_resumption.h"
#include "tiering/peers/transport/buffer_pool.h"
#include "tiering/peers/transport/peer_crypto.h"
#include "tiering/peers/transport/peer_transport.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {

// The keys of one connection to a peer, kept by the Fetches sent on it.
struct LinkCrypto {
  SessionKeys keys;
  uint64_t session = 0;
  uint64_t next_seq = 2;  // progress thread only; 1 was the handshake's
  Mutex mu;               // guards window. A leaf lock.
  ReplayWindow window GUARDED_BY(mu);
  // True if `seq` was not seen before (then it is recorded).
  bool Accept(uint64_t seq) {
    MutexLock lock(mu);
    return window.Accept(seq);
  }
};

// One Fetch: shared by its caller and the progress thread.
struct PeerRequest {
  uint64_t id = 0;
  size_t peer = 0;
  std::string path;  // the request's body; ref.path views it
  ChunkRef ref;
  uint32_t timeout_ms = 1;
  uint16_t flags = 0;                  // the request's (kIfResident)
  uint64_t generation = 0;             // of the connection it was sent on (progress thread)
  PeerTransport* via = nullptr;        // the transport it was posted to (its caller's)
  std::shared_ptr<LinkCrypto> crypto;  // ... and its keys (progress thread)
  BufferPool::Buffer sealed;           // the answer's bytes as they came
  std::shared_ptr<BufferPool> pool;    // where `sealed` goes back
  ~PeerRequest() {
    if (pool) pool->Give(std::move(sealed));
  }
  std::chrono::steady_clock::time_point sent_at;  // progress thread
  // The caller's deadline: a request a hedge left behind (abandoned, its
  // caller gone with SOURCE's bytes) is ended here at the latest.
  std::chrono::steady_clock::time_point deadline;
  WireHeader header{};  // the kData answer's header
  size_t header_size = 0;
  uint64_t seq = 0;

  Mutex mu;  // guards the rest; takes BufferPool::mu_ under it (OnData)
  CondVar cv;
  // Changed only on the progress thread (or by Stop after it ended), which
  // may therefore read it without the lock.
  enum Phase { kWaiting, kReceiving, kDone } phase = kWaiting;
  bool abandoned GUARDED_BY(mu) = false;  // the caller gave up (its deadline, or its hedge won)
  bool settled GUARDED_BY(mu) = false;    // ... and the progress thread has dealt with it
  ssize_t result = 0;                     // kDone: the length (sealed holds it), or -errno
};

enum class LinkState { kDown, kConnecting, kUp, kIdle };

// What any thread may read of a link (and a Fetch write: last_used,
// wanted_at, slow_until), atomics all; the progress thread changes the rest.
struct LinkStatus {
  std::atomic<LinkState> state{LinkState::kIdle};
  // Not a home: its transport failed, it went silent for dead_after, it
  // refused us, or it never came up within the grace. A slow peer, one
  // whose session was forgotten, or one closed for being idle is not.
  std::atomic<bool> dead{false};
  // Fetches skip it until then (steady_clock ns): it let one time out.
  std::atomic<int64_t> slow_until{0};
  std::atomic<int64_t> last_used{
      0};  // steady_clock ns of the last Fetch (its start and end) or Offer
  std::atomic<uint64_t> no_slot{0};  // connects put off: max_connections open, none idle
  // Its connection failed and has not come up since: a connect under way
  // is a retry, which no Fetch waits for (it reads SOURCE meanwhile).
  std::atomic<bool> retrying{false};
  // steady_clock ns when a read last wanted it and could not have it (a
  // Fetch skipped it, or a chunk it homes went elsewhere while it was
  // taken for gone): while wanted, it is probed on a short timer.
  std::atomic<int64_t> wanted_at{0};
};

// The progress thread's alone: the connection (written by PeerConnection,
// and by its table PeerConnections on the way up) and the requests sent on
// it (added by PeerClient::Send).
struct LinkProgress {
  explicit LinkProgress(const PeerClientOptions& o)
      : liveness(o.dead_after), backoff(o.retry_min), slow_backoff(o.retry_min) {}

  PeerEndpoint ep = nullptr;
  std::shared_ptr<LinkCrypto> crypto;  // up: the connection's keys
  uint64_t generation = 0;             // one per connection attempt; stale callbacks compare it
  // What the last session left to resume it: offered once, at the next
  // connection (session_resumption.h).
  std::optional<ResumeTicket> ticket;
  bool ever_up = false;
  // Up: a message came back on this connection, so the peer's reply
  // endpoint to this worker is wired up (PeerClient::Stop waits for it).
  bool answered = false;
  std::chrono::steady_clock::time_point deadline;  // connecting: the handshake is due
  std::chrono::steady_clock::time_point retry_at;
  std::chrono::steady_clock::time_point last_heard;    // up: the last message that authenticated
  std::chrono::steady_clock::time_point last_ping;     // up: the last kPing sent
  std::chrono::steady_clock::time_point connected_at;  // up: when this connection came up
  uint64_t ping_id = 0;                                // ... and its request id
  // Its ping round trips: how long it may be silent before it is stalled.
  PeerLiveness liveness;
  std::chrono::milliseconds backoff{0};
  std::chrono::milliseconds slow_backoff{0};
  // Slow because it answered nothing, not even a ping (CheckStall): the
  // first message from it that authenticates ends that at once.
  bool stalled = false;
  // Its connection was dropped for silence (PeerConnection::Redial) and
  // it has not answered since: its failed connects are no death before
  // dead_after, and a new connection's handshake is not an answer.
  bool redialing = false;
  // It said it is leaving the job (kLeaving): down quietly, taken for gone.
  bool left = false;
  std::chrono::steady_clock::time_point last_attempt;                  // the last connect started
  std::unordered_map<uint64_t, std::shared_ptr<PeerRequest>> pending;  // sent, by request id
};

// One peer of the job, as this node asks it.
struct PeerLink {
  PeerLink(size_t i, const PeerClientOptions& o)
      : index(i),
        address(o.peers[i]),
        hedge_time(o.hedge_min, o.hedge_max),
        slots(o.max_in_flight),
        progress(o) {}

  const size_t index;
  const PeerAddress address;
  LinkStatus status;  // any thread
  // How long a Fetch waits for it before SOURCE is read too, learnt from
  // its answers on the progress thread; read by any thread.
  HedgeTime hedge_time;
  PeerLinkCounters counters;  // any thread
  // Its requests outstanding at once; also where Fetches wait for its
  // state to change (PeerConnection::Signal).
  FetchSlots slots;
  LinkProgress progress;  // progress thread only
};

// `l`'s state and counters, as an item of the stats' list of peers
// (between its BeginItem and EndItem). Any thread.
void VisitLinkCounters(const PeerLink& l, CounterVisitor& v);

}  // namespace tierfs
