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

// Offers up to this size (path and bytes) are sent eagerly.
constexpr uint64_t kEagerOffer = uint64_t{1} << 20;

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
      offers_(options_.max_offers, options_.max_offer_bytes) {}

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
  return r >= 0 ? Open(l, p, dest) : r;
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
  if (state == LinkState::kIdle && !transport()->Post([this, &l] { connections_.Asked(l); })) {
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
    PeerLink& l = connections_.link(p->peer);
    connections_.TimedOut(l, p->generation);
    if (p->phase != PeerRequest::kReceiving) connections_.Complete(l, p, -ETIMEDOUT);
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
  PeerLink& l = connections_.link(p->peer);
  LinkProgress& c = l.progress;
  if (l.status.state.load() != LinkState::kUp) {
    connections_.Complete(l, p, -EHOSTDOWN);
    return;
  }
  p->generation = c.generation;
  p->crypto = c.crypto;
  WireHeader h;
  size_t n = EncodeRequest(WireIds{p->id, c.crypto->session, c.crypto->next_seq++}, p->ref,
                           p->timeout_ms, &h, p->flags);
  if (!SealWire(c.crypto->keys.send, &h, n, p->path.data(), p->path.size(), nullptr)) {
    connections_.Complete(l, p, -EIO);
    return;
  }
  p->sent_at = Clock::now();
  c.pending[p->id] = p;
  transport()->Send(c.ep, h, n, p->path.data(), p->path.size(), PeerTransport::kReply,
                    [this, p](bool ok) {
                      if (!ok) connections_.Complete(connections_.link(p->peer), p, -ECONNRESET);
                    });
}

bool PeerClient::Offer(size_t peer, const ChunkRef& ref, const char* data) {
  if (peer >= connections_.size()) return false;
  PeerLink& l = connections_.link(peer);
  l.status.last_used.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  ChunkRef whole = ref;
  whole.range_off = whole.range_len = 0;
  const uint64_t length = whole.chunk_length();
  if (!ValidChunkRef(whole) || length == 0) return false;
  const uint64_t bytes = whole.path.size() + length;
  if (l.status.state.load() != LinkState::kUp || !offers_.TryTake(bytes)) {
    l.counters.offers_dropped++;
    return false;
  }
  // The body: the path, then the bytes; sealed in place on the progress
  // thread, which numbers the connection's messages. The reference's path
  // views the body's.
  auto body = std::make_shared<BufferPool::Buffer>(buffers_->Take(bytes));
  std::memcpy(body->get(), whole.path.data(), whole.path.size());
  std::memcpy(body->get() + whole.path.size(), data, length);
  whole.path = std::string_view(body->get(), whole.path.size());
  bool posted = transport()->Post([this, peer, whole, body, bytes] {
    PeerLink& l = connections_.link(peer);
    LinkProgress& c = l.progress;
    WireHeader h;
    if (l.status.state.load() != LinkState::kUp) {
      l.counters.offers_dropped++;
      OfferDone(std::move(*body), bytes);
      return;
    }
    size_t n = EncodeOffer(WireIds{0, c.crypto->session, c.crypto->next_seq++}, whole, &h);
    if (!SealWire(c.crypto->keys.send, &h, n, body->get(), bytes, nullptr)) {
      OfferDone(std::move(*body), bytes);
      return;
    }
    l.counters.offered++;
    // Eager up to kEagerOffer: the bytes go with the header, with no
    // rendezvous round trips and the wake-ups they cost both sides.
    // With a reply endpoint, as every message: an offer may be the first
    // on a new connection, and the server answers nothing but keeps the
    // session for the requests that follow.
    const uint32_t flags =
        PeerTransport::kReply | (bytes <= kEagerOffer ? PeerTransport::kEager : 0);
    transport()->Send(c.ep, h, n, body->get(), bytes, flags,
                      [this, body, bytes](bool) { OfferDone(std::move(*body), bytes); });
  });
  if (!posted) OfferDone(std::move(*body), bytes);
  return posted;
}

void PeerClient::OfferDone(BufferPool::Buffer body, uint64_t bytes) {
  buffers_->Give(std::move(body));
  offers_.Give(bytes);
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
  v.Counter("stray", stray_, {"Answers from peers that matched no connection: dropped."});
  v.Histogram("fetch_latency", latency_, {"Time to fetch a chunk from a peer."});
  // Per peer, latency as a sum (mean = latency_us / fetched_chunks): the
  // Prometheus writer keeps one histogram per name, not one per list item.
  v.BeginList("remote", "peer");
  for (size_t i = 0; i < peers; ++i) {
    const PeerLink& l = connections_.link(i);
    const PeerLinkCounters& c = l.counters;
    v.BeginItem({{"name", l.address.name}});
    v.Flag("up", l.status.state.load() == LinkState::kUp,
           {"1 if this node is connected to the peer."});
    v.Flag("dead", l.status.dead.load(), {"1 if the peer is taken for gone."});
    v.Counter("fetched_chunks", c.fetched_chunks, {"Chunks fetched from the peer."});
    v.Counter("fetched_bytes", c.fetched_bytes, {"Bytes fetched from the peer.", Unit::kBytes});
    v.Counter("latency_us", c.latency_us,
              {"Time spent fetching chunks from the peer, summed over the chunks fetched.",
               Unit::kMicroseconds});
    v.Counter("timeouts", c.timeouts, {"Fetches the peer did not answer in time."});
    v.Counter("ups", c.ups, {"Times the connection to the peer came up."});
    v.Counter("resumed", c.resumed,
              {"Times it came up by resuming an earlier session (no MUNGE credential)."});
    v.Counter("resume_refused", c.resume_refused,
              {"Resumptions the peer refused (it restarted, or the ticket expired): a full "
               "handshake followed."});
    v.Counter("downs", c.downs, {"Times the connection to the peer went down."});
    v.Counter("connect_failures", c.connect_failures,
              {"Attempts to connect to the peer that failed."});
    v.Counter("refused", c.refused, {"Handshakes with the peer that failed authentication."});
    v.Counter("garbage", c.garbage,
              {"Undecodable or unexpected answers from the peer (connection cut)."});
    v.Counter("forged", c.forged,
              {"Answers from the peer that did not authenticate (connection cut)."});
    v.Counter("replayed", c.replayed,
              {"Answers from the peer with a sequence number seen before (connection cut)."});
    v.Counter("errors", c.errors, {"Error answers from the peer."});
    v.Counter("busy", c.busy, {"Fetches the peer was too busy to answer."});
    v.Counter("skipped", c.skipped,
              {"Fetches not tried because the peer was not up, or slow to answer."});
    v.Counter("late", c.late, {"Answers that came after their fetch had given up."});
    v.Counter("stalls", c.stalls,
              {"Times the peer answered nothing, not even a ping, while fetches waited: they "
               "were read from SOURCE here."});
    v.Counter("closed_idle", c.closed_idle, {"Connections to the peer closed for being unused."});
    v.Counter("connect_us", c.connect_us,
              {"Time spent connecting to the peer (handshake and transport), summed over the ups.",
               Unit::kMicroseconds});
    v.Counter("resets", c.resets,
              {"Times the peer had forgotten the connection and it was made again."});
    v.Counter("not_resident", c.not_resident,
              {"Fetches of chunks the peer did not hold (read from SOURCE here, then offered)."});
    v.Counter("offered", c.offered, {"Chunks read from SOURCE here and offered to the peer."});
    v.Counter(
        "offers_dropped", c.offers_dropped,
        {"Chunks not offered to the peer: it was not up, or too many offers were in flight."});
    v.Flag("slow", Clock::now().time_since_epoch().count() < l.status.slow_until.load(),
           {"1 if reads skip the peer now (it was slow or silent): they read SOURCE."});
    v.Counter("left", c.left, {"Times the peer said it was leaving the job."});
    v.Counter("hedges", c.hedges,
              {"Fetches the peer had not begun to answer in its hedge time: SOURCE was read too."});
    v.Counter("hedges_won", c.hedges_won,
              {"Hedged fetches that had SOURCE's bytes before the peer's answer."});
    v.Counter("hedges_lost", c.hedges_lost,
              {"Hedged fetches the peer had answered first: SOURCE's bytes were not needed."});
    v.Counter("hedge_bytes", c.hedge_bytes,
              {"Bytes hedged fetches read from SOURCE.", Unit::kBytes});
    v.Gauge("hedge_after_us", static_cast<double>(hedge_after(l.index).count()),
            {"How long a fetch waits for the peer before SOURCE is read too (the p99 of its "
             "answers, within bounds).",
             Unit::kMicroseconds});
    v.Counter("probes", c.probes,
              {"Pings and connects made on a short timer while reads wanted the peer."});
    v.Counter("reconnects_after_silence", c.reconnects_after_silence,
              {"Connections to the peer dropped and made afresh: it answered nothing while "
               "reads wanted it."});
    v.EndItem();
  }
  v.EndList();
}

}  // namespace tierfs