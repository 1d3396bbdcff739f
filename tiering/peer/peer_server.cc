#include "tiering/peer/peer_server.h"

#include <cerrno>

#include "tiering/log.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;

// How long a refused connection lingers for its answer to leave.
constexpr std::chrono::milliseconds kLinger(1000);

// The first ten events of a kind are logged, then every thousandth.
bool Worth(uint64_t n) { return n <= 10 || n % 1000 == 0; }

}  // namespace

struct PeerServer::Connection {
  uint64_t id = 0;
  ucp_ep_h ep = nullptr;
  enum State { kAwaitHello, kChecking, kReady, kClosing } state = kAwaitHello;
  Clock::time_point hello_deadline;
  Clock::time_point close_at;  // kClosing: dropped then
  std::string peer;            // the authenticated name
  size_t in_flight = 0;        // requests of this connection in the server
  std::unordered_map<uint64_t, Clock::time_point> sending;  // data answers by request id
};

struct PeerServer::Job {
  uint64_t request_id = 0;
  std::string path;
  ChunkRef ref;  // ref.path views `path`
  std::string peer;
  Clock::time_point start;
  std::unique_ptr<char[]> buffer;
  ChunkBytes bytes;
  int result = 0;
};

PeerServer::PeerServer(PeerAuth* auth, ChunkProvider* provider, PeerServerOptions options)
    : auth_(auth),
      provider_(provider),
      options_(std::move(options)),
      ucx_(options_.ucx),
      pool_(options_.threads, options_.max_in_flight + 8) {
  ucx_.SetAmHandler(
      kPeerAmId, [this](const void* h, size_t hn, void* d, size_t n, const ucp_am_recv_param_t* p) {
        return OnMessage(h, hn, d, n, p);
      });
  ucx_.SetEndpointErrorHandler([this](ucp_ep_h ep, ucs_status_t) {
    auto it = by_ep_.find(ep);
    if (it != by_ep_.end()) Drop(it->second->id);
  });
}

PeerServer::~PeerServer() { Stop(); }

int PeerServer::Start(std::string* error) {
  int port = ucx_.Listen(
      options_.listen_host, options_.port, [this](ucp_conn_request_h r) { OnConnRequest(r); },
      error);
  if (port < 0) return -1;
  port_ = static_cast<uint16_t>(port);
  ucx_.Start([this] { Tick(); });
  TIERFS_LOG(kInfo, "peer server \"{}\" listening on {}:{}", auth_->self().name,
             options_.listen_host, port_);
  return port;
}

void PeerServer::Stop() {
  ucx_.Stop(
      [this] {
        for (auto& [ep, c] : by_ep_) ucx_.Close(ep);
        by_ep_.clear();
        by_id_.clear();
        counters_.open = 0;
      },
      std::chrono::milliseconds(1000));
  pool_.Shutdown();
}

void PeerServer::OnConnRequest(ucp_conn_request_h request) {
  if (by_ep_.size() >= options_.max_connections) {
    counters_.rejected_connections++;
    ucx_.Reject(request);
    return;
  }
  std::string error;
  ucp_ep_h ep = ucx_.Accept(request, &error);
  if (ep == nullptr) {
    TIERFS_LOG(kWarning, "peer server: cannot accept a connection: {}", error);
    return;
  }
  auto c = std::make_unique<Connection>();
  c->id = next_id_++;
  c->ep = ep;
  c->hello_deadline = Clock::now() + options_.hello_timeout;
  by_id_[c->id] = c.get();
  by_ep_[ep] = std::move(c);
  counters_.connections++;
  counters_.open = by_ep_.size();
}

ucs_status_t PeerServer::OnMessage(const void* header, size_t header_size, void* data, size_t size,
                                   const ucp_am_recv_param_t* param) {
  auto it = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? by_ep_.find(param->reply_ep)
                                                                 : by_ep_.end();
  if (it == by_ep_.end()) {  // no sender to answer, or one cut off
    counters_.stray++;
    return UcxWorker::Discard(param);
  }
  Connection& c = *it->second;
  if (c.state == Connection::kClosing) return UcxWorker::Discard(param);
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {  // no request has a large body
    CutOff(c, "a message with a large body");
    return UCS_ERR_REJECTED;
  }
  PeerMessage m;
  WireStatus st = DecodeHeader(header, header_size, size, &m);
  if (st != WireStatus::kOk) {
    if (st == WireStatus::kBadVersion) counters_.bad_version++;
    CutOff(c, WireStatusName(st));
    return UCS_OK;
  }
  std::string_view body(static_cast<const char*>(data), size);
  if (m.type == MsgType::kHello && c.state == Connection::kAwaitHello) {
    OnHello(c, m.request_id, body);
  } else if (m.type == MsgType::kRequest) {
    OnRequest(c, m, body);
  } else {
    CutOff(c, m.type == MsgType::kHello ? "a second hello" : "not a request");
  }
  return UCS_OK;
}

void PeerServer::OnHello(Connection& c, uint64_t request_id, std::string_view cred) {
  // Hellos are checked on the pool, a few at a time, so connections that
  // cannot authenticate never take the threads from requests that did.
  if (checking_ >= kMaxChecking) {
    counters_.busy++;
    Drop(c.id);
    return;
  }
  ++checking_;
  c.state = Connection::kChecking;
  uint64_t id = c.id;
  bool queued = pool_.Submit([this, id, request_id, cred = std::string(cred)] {
    PeerClaim claim;
    std::string detail, answer;
    AuthVerdict v = auth_->Check(cred, PeerClaim::kHello, &claim, &detail);
    if (v == AuthVerdict::kOk) {
      const PeerIdentity& self = auth_->self();
      PeerClaim reply{PeerClaim::kAnswer, RandomNonce(), claim.nonce,
                      self.job,           self.name,     claim.from};
      if (auth_->Make(reply, &answer, &detail) != 0) v = AuthVerdict::kUnavailable;
    }
    ucx_.Post([this, id, request_id, v, detail, from = claim.from, answer] {
      --checking_;
      auto it = by_id_.find(id);
      if (it == by_id_.end()) return;
      Connection& c = *it->second;
      if (v != AuthVerdict::kOk) {
        uint64_t n = ++counters_.refused[static_cast<int>(v)];
        if (Worth(n)) {
          TIERFS_LOG(kWarning, "peer server: hello refused ({}): {}", AuthVerdictName(v), detail);
        }
        Refuse(c, request_id, WireError::kDenied, MsgType::kHelloAnswer);
        return;
      }
      c.state = Connection::kReady;
      c.peer = from;
      counters_.hellos++;
      auto body = std::make_shared<std::string>(answer);
      WireHeader h;
      size_t n = EncodeHelloAnswer(request_id, WireError::kOk, &h);
      ucx_.Send(c.ep, kPeerAmId, h, n, body->data(), body->size(), UCP_AM_SEND_FLAG_REPLY,
                [body](ucs_status_t) {});
    });
  });
  if (!queued) {
    --checking_;
    counters_.busy++;
    Drop(id);
  }
}

void PeerServer::OnRequest(Connection& c, const PeerMessage& m, std::string_view path) {
  counters_.requests++;
  if (c.state != Connection::kReady) {
    uint64_t n = ++counters_.unauthenticated;
    if (Worth(n)) TIERFS_LOG(kWarning, "peer server: a request before authentication: refused");
    Refuse(c, m.request_id, WireError::kDenied, MsgType::kError);
    return;
  }
  auto job = std::make_shared<Job>();
  job->request_id = m.request_id;
  job->path.assign(path);
  job->ref = m.chunk;
  job->ref.path = job->path;
  if (!ValidChunkRef(job->ref)) {
    CutOff(c, "an invalid chunk reference");
    return;
  }
  WireError refusal = WireError::kOk;
  if (job->ref.chunk_size != options_.chunk_size) {
    refusal = WireError::kBadRequest;
    counters_.errors++;
  } else if (in_flight_ >= options_.max_in_flight || c.in_flight >= options_.max_per_connection) {
    refusal = WireError::kBusy;
    counters_.busy++;
  }
  if (refusal != WireError::kOk) {
    SendError(c, m.request_id, refusal);
    return;
  }
  job->peer = c.peer;
  job->start = Clock::now();
  ++in_flight_;
  ++c.in_flight;
  uint64_t id = c.id;
  bool queued = pool_.Submit([this, id, job] {
    job->buffer = TakeBuffer();
    job->bytes.scratch = job->buffer.get();
    job->result = provider_->ReadChunk(job->ref, &job->bytes);
    if (job->result == 0 && job->bytes.data == nullptr) job->result = -EIO;
    if (job->result != 0 || job->bytes.data != job->buffer.get()) {
      GiveBuffer(std::move(job->buffer));  // not sent from it: free for the next read now
    }
    ucx_.Post([this, id, job] { Answer(id, job); });
  });
  if (!queued) {
    --in_flight_;
    --c.in_flight;
    counters_.busy++;
    SendError(c, m.request_id, WireError::kBusy);
  }
}

void PeerServer::Answer(uint64_t conn, std::shared_ptr<Job> job) {
  auto it = by_id_.find(conn);
  auto finish = [this, conn, job](bool served) {
    --in_flight_;
    auto it = by_id_.find(conn);
    if (it != by_id_.end()) {
      --it->second->in_flight;
      it->second->sending.erase(job->request_id);
    }
    if (served) {
      uint64_t bytes = job->ref.length();
      counters_.served_chunks++;
      counters_.served_bytes += bytes;
      CountServed(job->peer, bytes);
      auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - job->start);
      counters_.serve_latency.Record(static_cast<uint64_t>(us.count()));
    }
    GiveBuffer(std::move(job->buffer));
    job->bytes.hold.reset();
  };
  if (it == by_id_.end()) {
    finish(false);
    return;
  }
  Connection& c = *it->second;
  if (job->result != 0) {
    counters_.errors++;
    SendError(c, job->request_id, WireErrorFromErrno(job->result));
    finish(false);
    return;
  }
  WireHeader h;
  size_t n = EncodeData(job->request_id, job->ref.length(), &h);
  c.sending[job->request_id] = Clock::now();
  ucx_.Send(c.ep, kPeerAmId, h, n, job->bytes.data, job->ref.length(), UCP_AM_SEND_FLAG_REPLY,
            [finish](ucs_status_t s) { finish(s == UCS_OK); });
}

void PeerServer::SendError(Connection& c, uint64_t request_id, WireError error) {
  WireHeader h;
  size_t n = EncodeError(request_id, error, &h);
  ucx_.Send(c.ep, kPeerAmId, h, n, nullptr, 0, UCP_AM_SEND_FLAG_REPLY, [](ucs_status_t) {});
}

// A force close right after the send could discard the answer still in
// UCX's buffers: the connection lingers (its messages dropped) until the
// peer closes it or Tick does.
void PeerServer::Refuse(Connection& c, uint64_t request_id, WireError error, MsgType type) {
  WireHeader h;
  size_t n = type == MsgType::kHelloAnswer ? EncodeHelloAnswer(request_id, error, &h)
                                           : EncodeError(request_id, error, &h);
  c.state = Connection::kClosing;
  c.close_at = Clock::now() + kLinger;
  ucx_.Send(c.ep, kPeerAmId, h, n, nullptr, 0, UCP_AM_SEND_FLAG_REPLY, nullptr);
}

void PeerServer::CutOff(Connection& c, const char* why) {
  uint64_t n = ++counters_.garbage;
  if (Worth(n)) {
    TIERFS_LOG(kWarning, "peer server: cut off connection {} ({}): {}", c.id,
               c.peer.empty() ? "not authenticated" : c.peer, why);
  }
  Drop(c.id);
}

void PeerServer::Drop(uint64_t id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  ucp_ep_h ep = it->second->ep;
  by_id_.erase(it);
  ucx_.Close(ep);
  by_ep_.erase(ep);  // destroys the Connection
  counters_.open = by_ep_.size();
}

void PeerServer::Tick() {
  auto now = Clock::now();
  if (now < next_tick_) return;
  next_tick_ = now + std::chrono::milliseconds(10);
  std::vector<uint64_t> late_hello, stuck, refused;
  for (auto& [id, c] : by_id_) {
    bool awaiting = c->state == Connection::kAwaitHello || c->state == Connection::kChecking;
    if (awaiting && now > c->hello_deadline) late_hello.push_back(id);
    if (c->state == Connection::kClosing && now > c->close_at) refused.push_back(id);
    for (auto& [request, since] : c->sending) {
      if (now - since > options_.send_timeout) {
        stuck.push_back(id);
        break;
      }
    }
  }
  for (uint64_t id : late_hello) {
    counters_.hello_timeouts++;
    Drop(id);
  }
  for (uint64_t id : stuck) {
    counters_.send_timeouts++;
    Drop(id);
  }
  for (uint64_t id : refused) Drop(id);
}

void PeerServer::CountServed(const std::string& peer, uint64_t bytes) {
  std::lock_guard lock(served_mu_);
  auto it = served_.find(peer);
  if (it == served_.end()) {
    it = served_.size() < options_.max_connections ? served_.emplace(peer, Served{}).first
                                                   : served_.emplace("(other)", Served{}).first;
  }
  it->second.chunks++;
  it->second.bytes += bytes;
}

std::unique_ptr<char[]> PeerServer::TakeBuffer() {
  {
    std::lock_guard lock(spare_mu_);
    if (!spare_.empty()) {
      auto b = std::move(spare_.back());
      spare_.pop_back();
      return b;
    }
  }
  return std::unique_ptr<char[]>(new char[options_.chunk_size]);
}

void PeerServer::GiveBuffer(std::unique_ptr<char[]> b) {
  if (!b) return;
  std::lock_guard lock(spare_mu_);
  if (spare_.size() < options_.threads) spare_.push_back(std::move(b));
}

void PeerServer::VisitCounters(CounterVisitor& v) const {
  const PeerServerCounters& c = counters_;
  v.BeginGroup("server");
  v.Gauge("port", port_);
  v.Counter("connections", c.connections);
  v.Counter("rejected_connections", c.rejected_connections);
  v.Gauge("open_connections", static_cast<double>(c.open.load()));
  v.Counter("hellos", c.hellos);
  v.Counter("unauthenticated", c.unauthenticated);
  v.Counter("hello_timeouts", c.hello_timeouts);
  v.Counter("send_timeouts", c.send_timeouts);
  v.Counter("garbage", c.garbage);
  v.Counter("stray", c.stray);
  v.Counter("bad_version", c.bad_version);
  v.Counter("requests", c.requests);
  v.Counter("served_chunks", c.served_chunks);
  v.Counter("served_bytes", c.served_bytes);
  v.Counter("busy", c.busy);
  v.Counter("errors", c.errors);
  v.Histogram("serve_latency", c.serve_latency);
  v.BeginGroup("refused");
  for (AuthVerdict r : {AuthVerdict::kInvalid, AuthVerdict::kExpired, AuthVerdict::kReplayed,
                        AuthVerdict::kWrongUser, AuthVerdict::kWrongJob, AuthVerdict::kWrongPeer,
                        AuthVerdict::kUnavailable}) {
    v.Counter(AuthVerdictKey(r), refused(r));
  }
  v.EndGroup();
  std::lock_guard lock(served_mu_);
  v.BeginList("by_peer", "peer");
  for (const auto& [name, s] : served_) {
    v.BeginItem({{"name", name}});
    v.Counter("chunks", s.chunks);
    v.Counter("bytes", s.bytes);
    v.EndItem();
  }
  v.EndList();
  v.EndGroup();
}

}  // namespace tierfs
