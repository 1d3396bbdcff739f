#include "tiering/peers/client/peer_client.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tiering/base/log.h"
#include "tiering/peers/client/peer_link.h"
#include "tiering/peers/transport/ucx_transport.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;

// How long a timed-out Fetch waits for its peer to be marked slow.
constexpr std::chrono::milliseconds kSettle(200);

// How often a waiting Fetch looks whether its transport failed.
constexpr std::chrono::milliseconds kTransportCheck(50);

}  // namespace

Result<std::unique_ptr<PeerClient>> PeerClient::Make(PeerAuth* auth, PeerClientOptions options) {
  auto made = UcxTransport::Make(options.ucx, kPeerAmId);
  if (!made.ok()) return made.status();
  std::unique_ptr<PeerClient> c(new PeerClient(auth, std::move(options)));
  {
    MutexLock restart(c->restart_mu_);
    if (Status s = c->Attach(std::move(made).value()); !s.ok()) return s;
  }
  return c;
}

PeerClient::PeerClient(PeerAuth* auth, PeerClientOptions options)
    : options_(std::move(options)),
      dialer_(auth, options_),
      connections_(options_, &dialer_),
      buffers_(std::make_shared<BufferPool>(size_t{64} << 20)),
      answers_(&connections_, buffers_),
      offers_(&connections_, buffers_, options_.max_offers, options_.max_offer_bytes) {}

PeerClient::~PeerClient() { Stop(); }

void PeerClient::Start() {
  connections_.Start();
  transport()->Start([this] { connections_.Tick(); });
}

// A connection up but not yet answered on may still be wired up by its
// peer (its reply endpoint to this worker): this worker stays until every
// one is answered, within the limit (UcxWorker::Stop).
void PeerClient::Stop() {
  MutexLock restart(restart_mu_);
  if (connections_.SetStopped() || transport() == nullptr) return;
  transport()->Stop([this] { connections_.Shutdown(); }, std::chrono::milliseconds(1000),
                    [this] { return connections_.Settled(); });
  dialer_.Shutdown();
  // The progress thread is gone: nothing can write into a caller's buffer now.
  connections_.EndAll(-ESHUTDOWN);
}

const std::string& PeerClient::name(size_t peer) const {
  return connections_.link(peer).address.name;
}
bool PeerClient::up(size_t peer) const {
  return connections_.link(peer).status.state.load() == LinkState::kUp;
}
bool PeerClient::dead(size_t peer) const { return connections_.link(peer).status.dead.load(); }
const PeerLinkCounters& PeerClient::counters(size_t peer) const {
  return connections_.link(peer).counters;
}

ssize_t PeerClient::Fetch(size_t peer, const ChunkRef& ref, char* dest, Deadline deadline,
                          uint16_t flags, Hedge* hedge) {
  if (peer >= connections_.size() || !ValidChunkRef(ref)) return -EINVAL;
  PeerLink& l = connections_.link(peer);
  LinkStatus& status = l.status;
  const int64_t now_ns = Clock::now().time_since_epoch().count();
  status.last_used.store(now_ns, std::memory_order_relaxed);
  if (now_ns < status.slow_until.load(std::memory_order_relaxed)) {  // it let one time out
    l.counters.skipped++;
    status.wanted_at.store(now_ns, std::memory_order_relaxed);
    return -EBUSY;
  }
  if (transport()->wedged()) {  // UCX failed here: nothing is asked until it is made again
    l.counters.skipped++;
    return -EHOSTDOWN;
  }
  if (status.state.load() != LinkState::kUp && !AwaitUp(l, deadline)) {
    l.counters.skipped++;
    status.wanted_at.store(now_ns, std::memory_order_relaxed);
    return -EHOSTDOWN;
  }
  if (!l.slots.Take(deadline)) {
    l.counters.busy++;
    return -EBUSY;
  }
  auto start = Clock::now();
  ssize_t r = -EBUSY;
  if (start.time_since_epoch().count() < status.slow_until.load(std::memory_order_relaxed)) {
    l.counters.skipped++;  // it stalled while this caller waited for a slot
  } else {
    r = Ask(l, ref, dest, deadline, flags, hedge);
  }
  if (r == -ECONNRESET && AwaitUp(l, deadline)) {
    r = Ask(l, ref, dest, deadline, flags, hedge);  // once more, on the connection made again
  }
  // Unused from its end, not its start: a fetch longer than idle_close
  // (a connection made, a slow home) does not leave the link to be closed
  // as idle at the next tick.
  status.last_used.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  l.slots.Give();
  if (r >= 0 && !(hedge != nullptr && hedge->used)) {
    l.counters.fetched_chunks++;
    l.counters.fetched_bytes += static_cast<uint64_t>(r);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    l.counters.latency_us += static_cast<uint64_t>(us.count());
    latency_.Record(static_cast<uint64_t>(us.count()));
  }
  return r;
}

ssize_t PeerClient::Ask(PeerLink& l, const ChunkRef& ref, char* dest, Deadline deadline,
                        uint16_t flags, Hedge* hedge) {
  auto start = Clock::now();
  auto p = std::make_shared<PeerRequest>();
  p->id = connections_.NextRequestId();
  p->peer = l.index;
  p->path.assign(ref.path);
  p->ref = ref;
  p->ref.path = p->path;
  p->pool = buffers_;
  p->flags = flags;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - start).count();
  p->timeout_ms = static_cast<uint32_t>(std::clamp<int64_t>(left, 1, UINT32_MAX));
  p->deadline = deadline;
  p->via = transport();
  if (!p->via->Post([this, p] { Send(p); })) return -ESHUTDOWN;
  if (ssize_t got = 0; hedge != nullptr && Race(l, p, dest, hedge, &got)) return got;
  ssize_t r = Wait(l, p, deadline);
  return r >= 0 ? answers_.Open(l, p, dest) : r;
}

bool PeerClient::AwaitUp(PeerLink& l, Deadline deadline) {
  if (connections_.stopped()) return false;
  const LinkState state = l.status.state.load();
  // Down, or being retried: SOURCE meanwhile. Only a first connect (of an
  // idle link, asked now) is waited for.
  if (state == LinkState::kDown || (state == LinkState::kConnecting && l.status.retrying.load())) {
    return false;
  }
  const uint64_t refused = l.status.no_slot.load();
  if (state == LinkState::kIdle &&
      !transport()->Post([this, &l] { connections_.Asked(connections_.connection(l.index)); })) {
    return false;  // stopping, or the transport failed: SOURCE now
  }
  // An attempt ends up or down, or idle when no connection could be
  // closed to make room for it.
  l.slots.WaitUntil(std::min(deadline, Clock::now() + options_.connect_timeout), [&] {
    const LinkState st = l.status.state.load();
    return st == LinkState::kUp || st == LinkState::kDown || l.status.no_slot.load() != refused;
  });
  return l.status.state.load() == LinkState::kUp;
}

ssize_t PeerClient::Wait(PeerLink& l, const std::shared_ptr<PeerRequest>& p, Deadline deadline) {
  MutexLock lock(p->mu);
  // Looked at every kTransportCheck: a request whose transport failed
  // (its progress thread stopped for good) is never answered.
  while (!p->cv.WaitUntil(p->mu, std::min(deadline, Clock::now() + kTransportCheck),
                          [&] { return p->phase == PeerRequest::kDone; })) {
    if (p->via->wedged()) {
      p->abandoned = true;
      return -ECONNRESET;  // kept by the failed transport's state, never completed there
    }
    if (Clock::now() >= deadline) break;
  }
  if (p->phase == PeerRequest::kDone) return p->result;
  p->abandoned = true;
  lock.Unlock();
  l.counters.timeouts++;
  // The peer did not answer in time: slow at once (TimedOut). A transfer
  // still running ends in p->sealed, which p keeps alive: nothing is
  // written to the caller's memory. The caller waits a moment (one
  // progress round; at most kSettle) for the peer to be marked slow.
  transport()->Post([this, p] {
    PeerConnection& conn = connections_.connection(p->peer);
    conn.TimedOut(p->generation);
    if (p->phase != PeerRequest::kReceiving) conn.Complete(p, -ETIMEDOUT);
    {
      MutexLock lock(p->mu);
      p->settled = true;
    }
    p->cv.NotifyAll();
  });
  lock.Lock();
  p->cv.WaitFor(p->mu, kSettle, [&]() REQUIRES(p->mu) { return p->settled; });
  return -ETIMEDOUT;
}

void PeerClient::Send(const std::shared_ptr<PeerRequest>& p) {
  PeerConnection& conn = connections_.connection(p->peer);
  PeerLink& l = conn.link();
  LinkProgress& c = l.progress;
  if (l.status.state.load() != LinkState::kUp) {
    conn.Complete(p, -EHOSTDOWN);
    return;
  }
  p->generation = c.generation;
  p->crypto = c.crypto;
  WireHeader h;
  size_t n = EncodeRequest(WireIds{p->id, c.crypto->session, c.crypto->next_seq++}, p->ref,
                           p->timeout_ms, &h, p->flags);
  if (!SealWire(c.crypto->keys.send, &h, n, p->path.data(), p->path.size(), nullptr)) {
    conn.Complete(p, -EIO);
    return;
  }
  p->sent_at = Clock::now();
  c.pending[p->id] = p;
  transport()->Send(c.ep, h, n, p->path.data(), p->path.size(), PeerTransport::kReply,
                    [this, p](bool ok) {
                      if (!ok) connections_.connection(p->peer).Complete(p, -ECONNRESET);
                    });
}

// The race: the peer has its hedge time to begin answering (the bytes
// arriving, or an error); then SOURCE is read into `dest` on this thread
// while the request stays with the progress thread. Whatever the peer
// sends then lands in the request's own buffer and is dropped with it
// (never in `dest`, which only this thread writes). Both racers are
// bounded: the request by its deadline (PeerConnection::EndAbandoned), SOURCE's read by
// the read path's own bounds. If SOURCE fails, the peer is waited for
// as if there were no hedge.
bool PeerClient::Race(PeerLink& l, const std::shared_ptr<PeerRequest>& p, char* dest, Hedge* hedge,
                      ssize_t* result) {
  const auto race_at = std::min(p->deadline, Clock::now() + hedge_after(l.index));
  {
    MutexLock lock(p->mu);
    if (p->cv.WaitUntil(p->mu, race_at, [&] { return p->phase != PeerRequest::kWaiting; }))
      return false;  // it answers (or its bytes are on their way): no race
  }
  if (Clock::now() >= p->deadline) return false;
  l.counters.hedges++;
  const ssize_t got = hedge->read(dest);
  if (got < 0) return false;
  bool peer_first = false;
  {
    MutexLock lock(p->mu);
    peer_first = p->phase != PeerRequest::kWaiting;
    p->abandoned = true;
  }
  (peer_first ? l.counters.hedges_lost : l.counters.hedges_won)++;
  l.counters.hedge_bytes += static_cast<uint64_t>(got);
  hedge->used = true;
  *result = got;
  return true;
}

std::chrono::microseconds PeerClient::hedge_after(size_t peer) const {
  return connections_.link(peer).hedge_time.after();
}

void PeerClient::Want(size_t peer) {
  if (peer < connections_.size()) {
    connections_.link(peer).status.wanted_at.store(Clock::now().time_since_epoch().count(),
                                                   std::memory_order_relaxed);
  }
}

bool PeerClient::Offer(size_t peer, const ChunkRef& ref, const char* data) {
  return offers_.Offer(peer, ref, data);
}

void PeerClient::VisitCounters(CounterVisitor& v) const {
  const size_t peers = connections_.size();
  size_t up = 0, dead = 0;
  for (size_t i = 0; i < peers; ++i) {
    up += connections_.link(i).status.state.load() == LinkState::kUp;
    dead += connections_.link(i).status.dead.load();
  }
  v.Gauge("up", static_cast<double>(up), kPeersUp);
  v.Gauge("down", static_cast<double>(peers - up), kPeersDown);
  v.Gauge("dead", static_cast<double>(dead),
          {"Peers of the job taken for gone: their chunks are kept by other nodes."});
  v.Flag("transport_failed", transport()->wedged(),
         {"1 if UCX failed on the asking side and was not started again: this node asks no "
          "peer until it is, or until it is remounted."});
  v.Counter("transport_restarts", restarts_.load(),
            {"Times UCX failed on the asking side and was started again."});
  v.Gauge("open_connections", static_cast<double>(connections_.open()),
          {"Connections to peers open or being opened (bounded by an option of the mount)."});
  v.Counter("stray", answers_.stray(), {"Answers from peers that matched no connection: dropped."});
  v.Histogram("fetch_latency", latency_, {"Time to fetch a chunk from a peer."});
  // Per peer, latency as a sum (mean = latency_us / fetched_chunks): the
  // Prometheus writer keeps one histogram per name, not one per list item.
  v.BeginList("remote", "peer");
  for (size_t i = 0; i < peers; ++i) {
    const PeerLink& l = connections_.link(i);
    v.BeginItem({{"name", l.address.name}});
    VisitLinkCounters(l, v);
    v.EndItem();
  }
  v.EndList();
}

Status PeerClient::Attach(std::unique_ptr<PeerTransport> transport) {
  Status s = transport->SetHandlers(
      [this](const PeerTransport::Message& m) { return answers_.OnMessage(m); },
      [this](PeerEndpoint ep, bool timed_out, const std::string& why) {
        connections_.OnEndpointError(ep, timed_out, why);
      });
  if (!s.ok()) return s;
  connections_.SetTransport(transport.get());
  transports_.push_back(std::move(transport));
  return Status::Ok();
}

// A new transport in place of one whose UCX failed (an abort
// contained on its progress thread, which is parked there for good). The
// failed worker is never called again: its thread may hold UCX's locks of
// that worker, never ours (no UCX call is made under a lock of ours). A new
// UCX context and worker share nothing with it but UCX's process-wide
// state, whose locks the abort path does not hold; if the new worker is
// not made within the limit all the same, the client stays without
// peers, as it was (UcxWorker::MakeWithin).
Status PeerClient::RestartTransport(std::chrono::milliseconds limit) {
  MutexLock restart(restart_mu_);
  if (connections_.stopped()) return Status::Error(ESHUTDOWN, "the client has stopped");
  PeerTransport* failed = transport();
  if (!failed->wedged()) return Status::Ok();
  auto made = UcxTransport::MakeWithin(options_.ucx, kPeerAmId, limit);
  if (!made.ok()) return made.status();
  failed->Abandon();  // no UCX call, no wait: its thread is parked
  // Its thread stopped for good and the new one has not started: this
  // thread alone on the progress thread's state.
  connections_.ForgetTransport(&stranded_);
  if (Status s = Attach(std::move(made).value()); !s.ok()) return s;
  restarts_++;
  transport()->Start([this] { connections_.Tick(); });
  return Status::Ok();
}

}  // namespace tierfs