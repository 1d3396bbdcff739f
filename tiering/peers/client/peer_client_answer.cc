// PeerClient: the answers of its peers, on the progress thread (data,
// errors, pongs), and their opening on the caller's thread; the asking is
// peer_client.cc's.
#include <cerrno>
#include <cstring>

#include "tiering/base/log.h"
#include "tiering/peers/client/peer_client.h"
#include "tiering/peers/client/peer_link.h"

namespace tierfs {

// On the caller's thread: the answer's tag checked, then its bytes copied
// into `dest` and its sequence number recorded. A failure cuts the peer off.
ssize_t PeerClient::Open(Link& l, const std::shared_ptr<Pending>& p, char* dest) {
  const uint64_t length = p->ref.length();
  bool opened = OpenWire(p->crypto->keys.recv, p->header.data(), p->header_size, p->seq,
                         p->sealed.get(), length, dest);
  bool fresh = opened && p->crypto->Accept(p->seq);
  buffers_->Give(std::move(p->sealed));
  if (fresh) return static_cast<ssize_t>(length);
  // Anyone who saw the request on the wire can answer it: this Fetch fails
  // (its caller reads SOURCE), the connection stays.
  uint64_t n = ++(opened ? l.counters.replayed : l.counters.forged);
  if (LogSampled(n)) {
    TIERFS_LOG(kWarning, "peer client: an answer from {} {}: ignored", l.address.name,
               opened ? "replays an earlier one" : "does not authenticate");
  }
  return -EBADMSG;
}

void PeerClient::Complete(Link& l, const std::shared_ptr<Pending>& p, ssize_t result) {
  {
    MutexLock lock(p->mu);
    if (p->phase == Pending::kDone) return;
    p->phase = Pending::kDone;
    p->result = result;
  }
  p->cv.NotifyAll();
  l.pending.erase(p->id);
}

ucs_status_t PeerClient::OnMessage(const void* header, size_t header_size, void* data, size_t size,
                                   const ucp_am_recv_param_t* param) {
  PeerMessage m;
  WireStatus st = DecodeHeader(header, header_size, size, &m);
  auto it = st == WireStatus::kOk ? by_session_.find(m.session) : by_session_.end();
  if (it == by_session_.end()) {  // garbage, or no connection of ours: nobody to cut off
    stray_++;
    return UcxWorker::Discard(param);
  }
  Link& l = *it->second;
  const bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
  if (m.type == MsgType::kData) {
    auto pit = l.pending.find(m.request_id);
    std::shared_ptr<Pending> p = pit == l.pending.end() ? nullptr : pit->second;
    if (p == nullptr || p->phase == Pending::kReceiving) {
      l.counters.late++;  // its caller gave up (or a forgery): nothing to act on
      return UcxWorker::Discard(param);
    }
    if (m.length == p->ref.length()) return OnData(l, p, header, header_size, m.seq, data, param);
    // The wrong length: the peer's fault only if the answer is its own.
    if (rndv || !OpenWire(l.crypto->keys.recv, header, header_size, m.seq, data, size, nullptr)) {
      l.counters.forged++;
      return UcxWorker::Discard(param);
    }
    l.pending.erase(p->id);
    l.counters.garbage++;
    Down(l, "an answer of the wrong length", /*dead=*/true);
    Complete(l, p, -EPROTO);
    return UcxWorker::Discard(param);
  }
  // Every other message is a header alone: authenticated here, or ignored.
  if (rndv || !OpenWire(l.crypto->keys.recv, header, header_size, m.seq, data, size, nullptr)) {
    l.counters.forged++;
    return UcxWorker::Discard(param);
  }
  if (!l.crypto->Accept(m.seq)) {
    l.counters.replayed++;
    return UcxWorker::Discard(param);
  }
  Heard(l);
  if (m.type == MsgType::kLeaving) {
    Leaving(l);
    return UCS_OK;
  }
  if (m.type == MsgType::kPong) {
    if (m.request_id == l.ping_id) OnPong(l);
    return UCS_OK;
  }
  if (m.type == MsgType::kError) {
    OnError(l, m);
    return UCS_OK;
  }
  l.counters.garbage++;  // its own, and a message a server does not send
  TIERFS_LOG(kWarning, "peer client: cut off {}: a message a server does not send", l.address.name);
  Down(l, "a message a server does not send", /*dead=*/true);
  return UcxWorker::Discard(param);
}

void PeerClient::OnError(Link& l, const PeerMessage& m) {
  auto pit = l.pending.find(m.request_id);
  std::shared_ptr<Pending> p = pit == l.pending.end() ? nullptr : pit->second;
  if (m.error == WireError::kUnknownSession) {
    // The peer dropped this session (it heard nothing from us for long):
    // connect again now; the Fetches it ends ask again on the new one. Not
    // dead: its chunks keep their home.
    // Told so on a keep-alive, nothing is waiting: idle until next needed
    // (two nodes competing for a full server's last slot must not take it
    // from each other at every heartbeat).
    l.counters.resets++;
    const bool wanted = !l.pending.empty();
    Forget(l, kIdle, -ECONNRESET);  // its Fetches ask again once it is up
    TIERFS_LOG(kInfo, "peer {} had forgotten this node's connection{}", l.address.name,
               wanted ? ": connecting again" : "");
    if (wanted) Connect(l);
    return;
  }
  if (p == nullptr || p->phase == Pending::kReceiving) {
    l.counters.late++;
    return;
  }
  Answered(l, *p);
  if (m.error == WireError::kBusy)
    l.counters.busy++;
  else if (m.error == WireError::kNotResident && (p->flags & kIfResident) != 0)
    l.counters.not_resident++;
  else
    l.counters.errors++;
  if (m.error == WireError::kDenied) {  // down first: the caller then sees it down
    l.pending.erase(p->id);
    Down(l, "the peer says we are not authenticated", /*dead=*/true);
  }
  Complete(l, p, WireErrorToErrno(m.error));
}

ucs_status_t PeerClient::OnData(Link& l, const std::shared_ptr<Pending>& p, const void* header,
                                size_t header_size, uint64_t seq, void* data,
                                const ucp_am_recv_param_t* param) {
  uint64_t length = p->ref.length();
  l.answered = true;
  Answered(l, *p);
  MutexLock lock(p->mu);
  if (p->abandoned) {
    lock.Unlock();
    Complete(l, p, -ETIMEDOUT);
    return UcxWorker::Discard(param);
  }
  std::memcpy(p->header.data(), header, header_size);
  p->header_size = header_size;
  p->seq = seq;
  p->sealed = p->pool->Take(length == 0 ? 1 : length);
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {  // the bytes are here
    if (length > 0) std::memcpy(p->sealed.get(), data, length);
    lock.Unlock();
    l.backoff = options_.retry_min;
    l.slow_backoff = options_.retry_min;
    Complete(l, p, static_cast<ssize_t>(length));
    return UCS_OK;
  }
  p->phase = Pending::kReceiving;
  lock.Unlock();
  return ucx()->ReceiveBody(data, p->sealed.get(), length, [this, p, length](ucs_status_t s) {
    Link& l = *links_[p->peer];
    if (s == UCS_OK) {  // it answers: retry soon if it fails later
      l.backoff = options_.retry_min;
      l.slow_backoff = options_.retry_min;
    }
    Complete(l, p, s == UCS_OK ? static_cast<ssize_t>(length) : -ECONNRESET);
  });
}

}  // namespace tierfs
