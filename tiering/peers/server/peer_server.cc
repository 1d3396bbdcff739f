#include "tiering/peers/server/peer_server.h"

#include "tiering/base/log.h"
#include "tiering/peers/server/peer_server_internal.h"

namespace tierfs {
namespace {

using peer_server_internal::Clock;
using peer_server_internal::SessionCrypto;

// Answer buffers kept for reuse, in bytes.
constexpr size_t kKeptBuffers = size_t{64} << 20;

// Sessions dropped whose keys are kept, to tell their client so.
constexpr size_t kForgotten = 4096;

// A session handed out this lately and not used yet may have its peer
// connecting to this worker (Stop); one older was given up by its peer.
constexpr std::chrono::seconds kConnectingWindow(2);

}  // namespace

// A session this server dropped (idle, or cut off): its keys and window,
// so that a message still naming it is answered kUnknownSession under them.
struct PeerServer::Forgotten {
  std::shared_ptr<SessionCrypto> crypto;
  ReplayWindow window;
};

PeerServer::PeerServer(PeerAuth* auth, ChunkProvider* provider, PeerServerOptions options,
                       std::string worker_address, TransportMaker remake)
    : auth_(auth),
      provider_(provider),
      options_(std::move(options)),
      remake_(std::move(remake)),
      pool_(options_.threads, options_.max_in_flight + 8, "peer server"),
      buffers_(kKeptBuffers) {
  PeerDoorOptions door;
  door.host = options_.listen_host;
  door.port = options_.port;
  door.inherited_fd = options_.inherited_fd;
  door.max_pending = options_.max_handshakes;
  door.max_per_address = options_.max_handshakes_per_address;
  door.handshake_timeout = options_.hello_timeout;
  door.max_sessions = options_.max_connections;
  door.session_ttl = options_.session_ttl;
  door.serving = [this] { return !transport()->wedged(); };
  door_ = std::make_unique<PeerDoor>(auth_, door, std::move(worker_address));
}

PeerServer::~PeerServer() { Stop(); }

Status PeerServer::Start() {
  if (Status s = door_->Start(); !s.ok()) return s;
  transport()->Start([this] { Tick(); });
  if (const uint16_t port = door_->port(); port > 0) {
    TIERFS_LOG(kInfo, "peer server \"{}\" listening on {}:{}", auth_->self().name,
               options_.listen_host, port);
  } else {
    TIERFS_LOG(kWarning, "peer server \"{}\": {}; retrying until it is free", auth_->self().name,
               door_->listen_error());
  }
  return Status::Ok();
}

// A peer whose session was handed out lately but has sent nothing yet
// may be wiring up its endpoint to this worker, and this worker its reply
// endpoint back: the worker stays until its first message (which comes
// once the reply endpoint is up), within the limit (PeerTransport::Stop).
void PeerServer::Stop() {
  MutexLock restart(restart_mu_);
  stopped_ = true;
  door_->Stop();
  if (transport() == nullptr) return;  // Make failed to attach one: nothing started
  const auto since = Clock::now() - kConnectingWindow;
  transport()->Stop(
      [this] {
        // Its clients drop their links quietly, rather than each finding
        // a transport error; the sends complete before the worker goes.
        // Not on a reply endpoint whose watch ended (its client went).
        for (auto& [session, c] : by_session_) {
          if (c->ep == nullptr) continue;
          SendBare(*c, MsgType::kLeaving, 0);
          counters_.leaving_told++;
        }
        by_session_.clear();
        counters_.open = 0;
      },
      std::chrono::milliseconds(1000),
      [this, since] { return door_->SessionsWaiting(since) == 0; });
  pool_.Shutdown();
}

PeerTransport::Receipt PeerServer::OnMessage(const PeerTransport::Message& in) {
  PeerMessage m;
  WireStatus st = DecodeHeader(in.header, in.header_size, in.size, &m);
  if (st == WireStatus::kOk && m.type == MsgType::kOffer) return OnOffer(m, in);
  if (in.rendezvous) {  // no request has a large body
    counters_.garbage++;
    return PeerTransport::Receipt::kRefused;
  }
  const bool ours =
      m.type == MsgType::kRequest || m.type == MsgType::kPing || m.type == MsgType::kBye;
  if (st != WireStatus::kOk || !ours) {
    if (st == WireStatus::kBadVersion) counters_.bad_version++;
    uint64_t n = ++counters_.garbage;
    if (LogSampled(n)) {
      TIERFS_LOG(kWarning, "peer server: dropped a message: {}",
                 st != WireStatus::kOk ? WireStatusName(st) : "not a request");
    }
    return PeerTransport::Receipt::kDone;
  }
  std::string path(in.size, '\0');
  Connection* c = Open(
      m, in.reply,
      [&](const SessionKeys& keys) {
        return OpenWire(keys.recv, in.header, in.header_size, m.seq, in.data, in.size, path.data());
      },
      "a message");
  if (c == nullptr) return PeerTransport::Receipt::kDone;
  switch (m.type) {
    case MsgType::kRequest:
      OnRequest(*c, m, path);
      break;
    case MsgType::kPing:
      counters_.pings++;
      SendBare(*c, MsgType::kPong, m.request_id);
      break;
    default:  // kBye: its client closed it; nothing to tell it later
      counters_.byes++;
      Drop(c->session, /*remember=*/false);
      break;
  }
  return PeerTransport::Receipt::kDone;
}

PeerServer::Connection* PeerServer::TakeSession(
    const PeerMessage& m, PeerEndpoint reply, const std::function<bool(const SessionKeys&)>& open) {
  if (reply == nullptr) {  // nowhere to answer: not one of our clients
    counters_.stray++;
    return nullptr;
  }
  AcceptedSession s;
  if (!door_->Take(m.session, open, &s)) {
    if (TellForgotten(m, reply, open)) return nullptr;
    uint64_t n = ++counters_.stray;  // no such session, or a forgery naming a new one
    if (LogSampled(n)) TIERFS_LOG(kWarning, "peer server: a message of no session: dropped");
    return nullptr;
  }
  if (by_session_.size() >= options_.max_connections) {
    // Full: the session heard from least recently, with nothing in flight,
    // makes room; its client is told when it speaks again (kUnknownSession)
    // and connects anew.
    Connection* lru = nullptr;
    for (auto& [id, c] : by_session_) {
      if (c->in_flight == 0 && (lru == nullptr || c->last_seen < lru->last_seen)) lru = c.get();
    }
    if (lru == nullptr) {
      counters_.rejected_connections++;
      return nullptr;
    }
    counters_.evicted_sessions++;
    Drop(lru->session);
  }
  auto c = std::make_unique<Connection>();
  c->session = s.id;
  c->ep = reply;
  c->peer = s.peer;
  c->crypto = std::make_shared<SessionCrypto>();
  c->crypto->keys = s.keys;
  auto it = by_session_.emplace(s.id, std::move(c)).first;
  counters_.connections++;
  counters_.open = by_session_.size();
  // Valid now (its message is being handled); watched from now on, since
  // UCX frees it without a word once its client fails.
  transport()->Watch(reply, [this, reply](bool refused, const std::string& why) {
    ReplyGone(reply, refused, why);
  });
  return it->second.get();
}

// Progress thread, perhaps inside UCX (before it frees `ep`): the sessions
// are only marked here, and dropped by Tick.
void PeerServer::ReplyGone(PeerEndpoint ep, bool refused, const std::string& why) {
  for (auto& [session, c] : by_session_) {
    if (c->ep != ep) continue;
    c->ep = nullptr;
    counters_.replies_gone++;
    // A client that does not hold the watch (another version of tierfs,
    // or one that refuses it) could not be told apart from one that is
    // gone: it is not served.
    if (refused) {
      uint64_t n = ++counters_.unwatched;
      if (LogSampled(n)) {
        TIERFS_LOG(kWarning, "peer server: {} refused its connection's watch ({}): not served",
                   c->peer, why);
      }
    }
  }
}

PeerServer::Connection* PeerServer::Open(const PeerMessage& m, PeerEndpoint reply,
                                         const std::function<bool(const SessionKeys&)>& open,
                                         const char* what) {
  auto it = by_session_.find(m.session);
  Connection* c = nullptr;
  if (it == by_session_.end()) {
    c = TakeSession(m, reply, open);  // the door checked the tag
    if (c == nullptr) return nullptr;
  } else if (!open(it->second->crypto->keys)) {
    // Anyone can name a session (its id travels in clear): a message that
    // does not open under its key, or replays one, is ignored; the session
    // stays.
    uint64_t n = ++counters_.forged;
    if (LogSampled(n)) {
      TIERFS_LOG(kWarning, "peer server: {} for {} does not authenticate: ignored", what,
                 it->second->peer);
    }
    return nullptr;
  } else {
    c = it->second.get();
  }
  if (!c->window.Accept(m.seq)) {
    counters_.replayed++;
    return nullptr;
  }
  c->last_seen = Clock::now();
  return c;
}

bool PeerServer::TellForgotten(const PeerMessage& m, PeerEndpoint reply,
                               const std::function<bool(const SessionKeys&)>& open) {
  auto it = forgotten_.find(m.session);
  if (it == forgotten_.end() || m.type == MsgType::kBye) return false;
  Forgotten& f = it->second;
  if (!open(f.crypto->keys) || !f.window.Accept(m.seq)) return false;  // not its client's
  WireHeader h;
  size_t n = EncodeError(WireIds{m.request_id, m.session, f.crypto->next_seq++},
                         WireError::kUnknownSession, &h);
  if (!SealWire(f.crypto->keys.send, &h, n, nullptr, 0, nullptr)) return false;
  counters_.forgotten_told++;
  transport()->Send(reply, h, n, nullptr, 0, 0, nullptr);
  return true;
}

void PeerServer::CutOff(Connection& c, const char* why) {
  uint64_t n = ++counters_.garbage;
  if (LogSampled(n)) TIERFS_LOG(kWarning, "peer server: cut off {}: {}", c.peer, why);
  Drop(c.session);
}

void PeerServer::Drop(uint64_t session, bool remember) {
  auto it = by_session_.find(session);
  if (it == by_session_.end()) return;
  if (remember) {
    if (forgotten_order_.size() >= kForgotten) {
      forgotten_.erase(forgotten_order_.front());
      forgotten_order_.pop_front();
    }
    forgotten_[session] = Forgotten{it->second->crypto, it->second->window};
    forgotten_order_.push_back(session);
  }
  by_session_.erase(it);  // destroys the Connection; jobs in flight find it gone
  counters_.open = by_session_.size();
}

void PeerServer::Tick() {
  auto now = Clock::now();
  if (now < next_tick_) return;
  next_tick_ = now + std::chrono::milliseconds(10);
  std::vector<uint64_t> stuck, idle, gone;
  for (auto& [session, c] : by_session_) {
    if (c->ep == nullptr) {
      gone.push_back(session);
      continue;
    }
    if (c->in_flight == 0 && now - c->last_seen > options_.idle_timeout) idle.push_back(session);
    for (auto& [request, since] : c->sending) {
      if (now - since > options_.send_timeout) {
        stuck.push_back(session);
        break;
      }
    }
  }
  for (uint64_t session : gone) Drop(session);  // its client closed its side, or went
  for (uint64_t session : stuck) {
    counters_.send_timeouts++;
    Drop(session);
  }
  // Its client pings while it holds the session: one silent this long is
  // gone (or stalled: told kUnknownSession when it speaks again).
  for (uint64_t session : idle) {
    counters_.idle_dropped++;
    Drop(session);
  }
}

void PeerServer::CountServed(const std::string& peer, uint64_t bytes) {
  MutexLock lock(served_mu_);
  auto it = served_.find(peer);
  if (it == served_.end()) {
    it = served_.size() < options_.max_connections ? served_.emplace(peer, Served{}).first
                                                   : served_.emplace("(other)", Served{}).first;
  }
  it->second.chunks++;
  it->second.bytes += bytes;
}

void PeerServer::VisitCounters(CounterVisitor& v) const {
  const PeerServerCounters& c = counters_;
  v.BeginGroup("server");
  v.Gauge("port", port(), {"The TCP port the peer server listens on (0: not bound)."});
  door_->VisitCounters(v);
  v.Counter("sessions", c.connections, {"Peer sessions taken up."});
  v.Counter("rejected_connections", c.rejected_connections,
            {"Peer sessions refused because too many were open, all of them busy."});
  v.Counter("evicted_sessions", c.evicted_sessions,
            {"Peer sessions dropped to make room for a new one (at the bound on connections)."});
  v.Gauge("open_connections", static_cast<double>(c.open.load()), {"Peer sessions open."});
  v.Flag("transport_failed", transport()->wedged(),
         {"1 if UCX failed on the serving side and was not started again: this node serves no "
          "peer until it is, or until it is remounted."});
  v.Counter("transport_restarts", restarts_.load(),
            {"Times UCX failed on the serving side and was started again."});
  v.Counter("forged", c.forged, {"Messages that did not open under their session's key."});
  v.Counter("replayed", c.replayed, {"Messages with a sequence number seen before."});
  v.Counter("send_timeouts", c.send_timeouts, {"Answers that could not be sent in time."});
  v.Counter("garbage", c.garbage, {"Undecodable or misplaced messages."});
  v.Counter("stray", c.stray, {"Messages naming no session: dropped."});
  v.Counter("pings", c.pings, {"Keep-alive messages answered."});
  v.Counter("byes", c.byes, {"Sessions closed by their peer for being unused."});
  v.Counter("idle_dropped", c.idle_dropped,
            {"Sessions dropped because their peer had been silent for three times the time that "
             "makes a peer taken for gone."});
  v.Counter("forgotten_told", c.forgotten_told,
            {"Messages on a dropped session, answered so that their peer connects again."});
  v.Counter("bad_version", c.bad_version, {"Messages of another wire version."});
  v.Counter("leaving_told", c.leaving_told,
            {"Peers told this node is leaving the job, when it stopped."});
  v.Counter("replies_gone", c.replies_gone,
            {"Sessions whose reply endpoint went: its peer closed it or failed; never sent to "
             "again."});
  v.Counter("unwatched", c.unwatched,
            {"Sessions dropped because their peer refused the watch on its endpoint (another "
             "version of tierfs)."});
  v.Counter("requests", c.requests, {"Chunk requests received from peers."});
  v.Counter("served_chunks", c.served_chunks, {"Chunks sent to peers."});
  v.Counter("served_bytes", c.served_bytes, {"Bytes sent to peers.", Unit::kBytes});
  v.Counter("busy", c.busy, {"Requests answered busy."});
  v.Counter("expired", c.expired, {"Requests whose deadline passed before the read."});
  v.Counter("errors", c.errors, {"Requests answered with another error."});
  v.Counter(
      "not_resident", c.not_resident,
      {"Requests for a chunk only if held here, answered that it is not (the peer reads SOURCE)."});
  v.Counter("offers", c.offers, {"Chunks peers read from SOURCE and offered to this node."});
  v.Counter("adopted", c.adopted, {"Offered chunks this node kept."});
  v.Counter("offers_refused", c.offers_refused,
            {"Offered chunks not kept: over the byte budget, no room, held already, or stale."});
  v.Gauge("bytes_in_flight", static_cast<double>(c.bytes_in_flight.load()),
          {"Bytes of answers being sent to peers.", Unit::kBytes, "in_flight"});
  v.Gauge(
      "peak_bytes_in_flight", static_cast<double>(c.peak_bytes_in_flight.load()),
      {"Most bytes of answers ever being sent to peers at once.", Unit::kBytes, "peak_in_flight"});
  v.Histogram("serve_latency", c.serve_latency,
              {"Time from a peer's request arriving to its answer sent."});
  MutexLock lock(served_mu_);
  v.BeginList("by_peer", "peer");
  for (const auto& [name, s] : served_) {
    v.BeginItem({{"name", name}});
    v.Counter("chunks", s.chunks, {"Chunks sent to this peer."});
    v.Counter("bytes", s.bytes, {"Bytes sent to this peer.", Unit::kBytes});
    v.EndItem();
  }
  v.EndList();
  v.EndGroup();
}

}  // namespace tierfs