#include "tiering/peers/client/peer_client.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tiering/base/log.h"
#include "tiering/peers/client/peer_link.h"

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
  auto ucx = UcxWorker::Make(options.ucx);
  if (!ucx.ok()) return ucx.status();
  std::unique_ptr<PeerClient> c(new PeerClient(auth, std::move(options)));
  {
    MutexLock restart(c->restart_mu_);
    if (Status s = c->Attach(std::move(ucx).value()); !s.ok()) return s;
  }
  return c;
}

PeerClient::PeerClient(PeerAuth* auth, PeerClientOptions options)
    : auth_(auth),
      options_(std::move(options)),
      pool_(kHandshakeThreads, 4 * 1024, "peer handshake"),
      buffers_(std::make_shared<BufferPool>(size_t{64} << 20)),
      offers_(options_.max_offers, options_.max_offer_bytes) {
  for (size_t i = 0; i < options_.peers.size(); ++i) {
    links_.push_back(std::make_unique<Link>(i, options_));
  }
}

PeerClient::~PeerClient() { Stop(); }

void PeerClient::Start() {
  started_at_ = Clock::now();
  if (options_.connect_at_start) {
    for (auto& l : links_) {
      l->state = kDown;  // the first Tick connects it
      l->retry_at = started_at_;
    }
  }
  ucx()->Start([this] { Tick(); });
}

// A connection up but not yet answered on may still be wired up by its
// peer (its reply endpoint to this worker): this worker stays until every
// one is answered, within the limit (UcxWorker::Stop).
void PeerClient::Stop() {
  MutexLock restart(restart_mu_);
  if (stopped_.exchange(true)) return;
  ucx()->Stop(
      [this] {
        LogEnd();
        // Its servers drop the sessions (kBye) rather than keep them for a
        // client that is gone; then everything else goes down.
        for (auto& l : links_) Close(*l);
        for (auto& l : links_) Down(*l, "shutting down", false);
      },
      std::chrono::milliseconds(1000),
      [this] {
        return std::none_of(links_.begin(), links_.end(),
                            [](const auto& l) { return l->state.load() == kUp && !l->answered; });
      });
  pool_.Shutdown();
  // The progress thread is gone: nothing can write into a caller's buffer now.
  for (auto& l : links_) {
    auto pending = std::move(l->pending);
    for (auto& [id, p] : pending) Complete(*l, p, -ESHUTDOWN);
  }
}

const std::string& PeerClient::name(size_t peer) const { return links_[peer]->address.name; }
bool PeerClient::up(size_t peer) const { return links_[peer]->state.load() == kUp; }
bool PeerClient::dead(size_t peer) const { return links_[peer]->dead.load(); }
const PeerLinkCounters& PeerClient::counters(size_t peer) const { return links_[peer]->counters; }

ssize_t PeerClient::Fetch(size_t peer, const ChunkRef& ref, char* dest, Deadline deadline,
                          uint16_t flags, Hedge* hedge) {
  if (peer >= links_.size() || !ValidChunkRef(ref)) return -EINVAL;
  Link& l = *links_[peer];
  const int64_t now_ns = Clock::now().time_since_epoch().count();
  l.last_used.store(now_ns, std::memory_order_relaxed);
  if (now_ns < l.slow_until.load(std::memory_order_relaxed)) {  // it let one time out
    l.counters.skipped++;
    l.wanted_at.store(now_ns, std::memory_order_relaxed);
    return -EBUSY;
  }
  if (ucx()->wedged()) {  // UCX failed here: nothing is asked until it is made again
    l.counters.skipped++;
    return -EHOSTDOWN;
  }
  if (l.state.load() != kUp && !AwaitUp(l, deadline)) {
    l.counters.skipped++;
    l.wanted_at.store(now_ns, std::memory_order_relaxed);
    return -EHOSTDOWN;
  }
  if (!l.slots.Take(deadline)) {
    l.counters.busy++;
    return -EBUSY;
  }
  auto start = Clock::now();
  ssize_t r = -EBUSY;
  if (start.time_since_epoch().count() < l.slow_until.load(std::memory_order_relaxed)) {
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

ssize_t PeerClient::Ask(Link& l, const ChunkRef& ref, char* dest, Deadline deadline, uint16_t flags,
                        Hedge* hedge) {
  auto start = Clock::now();
  auto p = std::make_shared<Pending>();
  p->id = next_request_++;
  p->peer = l.index;
  p->path.assign(ref.path);
  p->ref = ref;
  p->ref.path = p->path;
  p->pool = buffers_;
  p->flags = flags;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - start).count();
  p->timeout_ms = static_cast<uint32_t>(std::clamp<int64_t>(left, 1, UINT32_MAX));
  p->deadline = deadline;
  p->via = ucx();
  if (!p->via->Post([this, p] { Send(p); })) return -ESHUTDOWN;
  if (ssize_t got = 0; hedge != nullptr && Race(l, p, dest, hedge, &got)) return got;
  ssize_t r = Wait(l, p, deadline);
  return r >= 0 ? Open(l, p, dest) : r;
}

bool PeerClient::AwaitUp(Link& l, Deadline deadline) {
  if (stopped_.load()) return false;
  int state = l.state.load();
  // Down, or being retried: SOURCE meanwhile. Only a first connect (of an
  // idle link, asked now) is waited for.
  if (state == kDown || (state == kConnecting && l.retrying.load())) return false;
  const uint64_t refused = l.no_slot.load();
  if (state == kIdle && !ucx()->Post([this, &l] {
        if (l.state.load() == kIdle) {
          Connect(l);
        } else if (l.state.load() != kConnecting) {
          Signal(l);
        }
      })) {
    return false;  // stopping, or the transport failed: SOURCE now
  }
  // An attempt ends up or down, or idle when no connection could be
  // closed to make room for it.
  l.slots.WaitUntil(std::min(deadline, Clock::now() + options_.connect_timeout), [&] {
    int st = l.state.load();
    return st == kUp || st == kDown || l.no_slot.load() != refused;
  });
  return l.state.load() == kUp;
}

void PeerClient::Signal(Link& l) { l.slots.NotifyAll(); }

ssize_t PeerClient::Wait(Link& l, const std::shared_ptr<Pending>& p, Deadline deadline) {
  MutexLock lock(p->mu);
  // Looked at every kTransportCheck: a request whose transport failed
  // (its progress thread stopped for good) is never answered.
  while (!p->cv.WaitUntil(p->mu, std::min(deadline, Clock::now() + kTransportCheck),
                          [&] { return p->phase == Pending::kDone; })) {
    if (p->via->wedged()) {
      p->abandoned = true;
      return -ECONNRESET;  // kept by the failed worker's state, never completed there
    }
    if (Clock::now() >= deadline) break;
  }
  if (p->phase == Pending::kDone) return p->result;
  p->abandoned = true;
  lock.Unlock();
  l.counters.timeouts++;
  // The peer did not answer in time: slow, at once, so no other caller
  // waits for it for a while; not dead (its chunks keep their home): it is
  // pinged, and is dead only if it stays silent for dead_after. A transfer
  // still running ends in p->sealed, which p keeps alive: nothing is
  // written to the caller's memory. The caller waits a moment (one
  // progress round; at most kSettle) for the peer to be marked slow.
  ucx()->Post([this, p] {
    Link& l = *links_[p->peer];
    if (p->generation == l.generation && l.state.load() == kUp) {
      const auto now = Clock::now();
      MarkSlow(l, now);
      if (now - l.last_ping >= std::chrono::milliseconds(10)) Ping(l);
      uint64_t n = l.counters.timeouts.load();
      if (LogSampled(n)) {
        TIERFS_LOG(
            kWarning, "peer {} did not answer in time: its chunks are read here for {} ms",
            l.address.name,
            std::chrono::duration_cast<std::chrono::milliseconds>(l.slow_backoff / 2).count());
      }
    }
    if (p->phase != Pending::kReceiving) Complete(l, p, -ETIMEDOUT);
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

void PeerClient::Send(const std::shared_ptr<Pending>& p) {
  Link& l = *links_[p->peer];
  if (l.state.load() != kUp) {
    Complete(l, p, -EHOSTDOWN);
    return;
  }
  p->generation = l.generation;
  p->crypto = l.crypto;
  WireHeader h;
  size_t n = EncodeRequest(WireIds{p->id, l.crypto->session, l.crypto->next_seq++}, p->ref,
                           p->timeout_ms, &h, p->flags);
  if (!SealWire(l.crypto->keys.send, &h, n, p->path.data(), p->path.size(), nullptr)) {
    Complete(l, p, -EIO);
    return;
  }
  p->sent_at = Clock::now();
  l.pending[p->id] = p;
  ucx()->Send(l.ep, kPeerAmId, h, n, p->path.data(), p->path.size(), UCP_AM_SEND_FLAG_REPLY,
              [this, p](ucs_status_t s) {
                if (s != UCS_OK) Complete(*links_[p->peer], p, -ECONNRESET);
              });
}

bool PeerClient::Offer(size_t peer, const ChunkRef& ref, const char* data) {
  if (peer >= links_.size()) return false;
  Link& l = *links_[peer];
  l.last_used.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  ChunkRef whole = ref;
  whole.range_off = whole.range_len = 0;
  const uint64_t length = whole.chunk_length();
  if (!ValidChunkRef(whole) || length == 0) return false;
  const uint64_t bytes = whole.path.size() + length;
  if (l.state.load() != kUp || !offers_.TryTake(bytes)) {
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
  bool posted = ucx()->Post([this, peer, whole, body, bytes] {
    Link& l = *links_[peer];
    WireHeader h;
    if (l.state.load() != kUp) {
      l.counters.offers_dropped++;
      OfferDone(std::move(*body), bytes);
      return;
    }
    size_t n = EncodeOffer(WireIds{0, l.crypto->session, l.crypto->next_seq++}, whole, &h);
    if (!SealWire(l.crypto->keys.send, &h, n, body->get(), bytes, nullptr)) {
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
        UCP_AM_SEND_FLAG_REPLY | (bytes <= kEagerOffer ? UCP_AM_SEND_FLAG_EAGER : 0);
    ucx()->Send(l.ep, kPeerAmId, h, n, body->get(), bytes, flags,
                [this, body, bytes](ucs_status_t) { OfferDone(std::move(*body), bytes); });
  });
  if (!posted) OfferDone(std::move(*body), bytes);
  return posted;
}

void PeerClient::OfferDone(BufferPool::Buffer body, uint64_t bytes) {
  buffers_->Give(std::move(body));
  offers_.Give(bytes);
}

void PeerClient::VisitCounters(CounterVisitor& v) const {
  size_t up = 0;
  for (const auto& l : links_) up += l->state.load() == kUp;
  v.Gauge("up", static_cast<double>(up), kPeersUp);
  v.Gauge("down", static_cast<double>(links_.size() - up), kPeersDown);
  size_t dead = 0;
  for (const auto& l : links_) dead += l->dead.load();
  v.Gauge("dead", static_cast<double>(dead),
          {"Peers of the job taken for gone: their chunks are kept by other nodes."});
  v.Flag("transport_failed", ucx()->wedged(),
         {"1 if UCX failed on the asking side and was not started again: this node asks no "
          "peer until it is, or until it is remounted."});
  v.Counter("transport_restarts", restarts_.load(),
            {"Times UCX failed on the asking side and was started again."});
  v.Gauge("open_connections", static_cast<double>(open_.load()),
          {"Connections to peers open or being opened (bounded by an option of the mount)."});
  v.Counter("stray", stray_, {"Answers from peers that matched no connection: dropped."});
  v.Histogram("fetch_latency", latency_, {"Time to fetch a chunk from a peer."});
  // Per peer, latency as a sum (mean = latency_us / fetched_chunks): the
  // Prometheus writer keeps one histogram per name, not one per list item.
  v.BeginList("remote", "peer");
  for (const auto& l : links_) {
    const PeerLinkCounters& c = l->counters;
    v.BeginItem({{"name", l->address.name}});
    v.Flag("up", l->state.load() == kUp, {"1 if this node is connected to the peer."});
    v.Flag("dead", l->dead.load(), {"1 if the peer is taken for gone."});
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
    v.Flag("slow", Clock::now().time_since_epoch().count() < l->slow_until.load(),
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
    v.Gauge("hedge_after_us", static_cast<double>(hedge_after(l->index).count()),
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