#include "tiering/peers/client/peer_answers.h"

#include <cerrno>
#include <cstring>

#include "tiering/base/log.h"

namespace tierfs {

ssize_t PeerAnswers::Open(PeerLink& l, const std::shared_ptr<PeerRequest>& p, char* dest) {
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

PeerTransport::Receipt PeerAnswers::OnMessage(const PeerTransport::Message& in) {
  const auto discard = PeerTransport::Discard(in);
  PeerMessage m;
  WireStatus st = DecodeHeader(in.header, in.header_size, in.size, &m);
  PeerConnection* conn = st == WireStatus::kOk ? connections_->BySession(m.session) : nullptr;
  if (conn == nullptr) {  // garbage, or no connection of ours: nobody to cut off
    stray_++;
    return discard;
  }
  PeerLink& l = conn->link();
  LinkProgress& c = l.progress;
  if (m.type == MsgType::kData) {
    auto pit = c.pending.find(m.request_id);
    std::shared_ptr<PeerRequest> p = pit == c.pending.end() ? nullptr : pit->second;
    if (p == nullptr || p->phase == PeerRequest::kReceiving) {
      l.counters.late++;  // its caller gave up (or a forgery): nothing to act on
      return discard;
    }
    if (m.length == p->ref.length()) return OnData(*conn, p, in, m.seq);
    // The wrong length: the peer's fault only if the answer is its own.
    if (in.rendezvous || !OpenWire(c.crypto->keys.recv, in.header, in.header_size, m.seq, in.data,
                                   in.size, nullptr)) {
      l.counters.forged++;
      return discard;
    }
    c.pending.erase(p->id);
    l.counters.garbage++;
    conn->Down("an answer of the wrong length", /*dead=*/true);
    conn->Complete(p, -EPROTO);
    return discard;
  }
  // Every other message is a header alone: authenticated here, or ignored.
  if (in.rendezvous ||
      !OpenWire(c.crypto->keys.recv, in.header, in.header_size, m.seq, in.data, in.size, nullptr)) {
    l.counters.forged++;
    return discard;
  }
  if (!c.crypto->Accept(m.seq)) {
    l.counters.replayed++;
    return discard;
  }
  conn->Heard();
  if (m.type == MsgType::kLeaving) {
    conn->Leaving();
    return PeerTransport::Receipt::kDone;
  }
  if (m.type == MsgType::kPong) {
    if (m.request_id == c.ping_id) conn->OnPong();
    return PeerTransport::Receipt::kDone;
  }
  if (m.type == MsgType::kError) {
    OnError(*conn, m);
    return PeerTransport::Receipt::kDone;
  }
  l.counters.garbage++;  // its own, and a message a server does not send
  TIERFS_LOG(kWarning, "peer client: cut off {}: a message a server does not send", l.address.name);
  conn->Down("a message a server does not send", /*dead=*/true);
  return discard;
}

void PeerAnswers::OnError(PeerConnection& conn, const PeerMessage& m) {
  if (m.error == WireError::kUnknownSession) {
    conn.Forgotten();
    return;
  }
  PeerLink& l = conn.link();
  auto pit = l.progress.pending.find(m.request_id);
  std::shared_ptr<PeerRequest> p = pit == l.progress.pending.end() ? nullptr : pit->second;
  if (p == nullptr || p->phase == PeerRequest::kReceiving) {
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
    l.progress.pending.erase(p->id);
    conn.Down("the peer says we are not authenticated", /*dead=*/true);
  }
  conn.Complete(p, WireErrorToErrno(m.error));
}

PeerTransport::Receipt PeerAnswers::OnData(PeerConnection& conn,
                                           const std::shared_ptr<PeerRequest>& p,
                                           const PeerTransport::Message& in, uint64_t seq) {
  PeerLink& l = conn.link();
  uint64_t length = p->ref.length();
  l.progress.answered = true;
  Answered(l, *p);
  MutexLock lock(p->mu);
  if (p->abandoned) {
    lock.Unlock();
    conn.Complete(p, -ETIMEDOUT);
    return PeerTransport::Discard(in);
  }
  std::memcpy(p->header.data(), in.header, in.header_size);
  p->header_size = in.header_size;
  p->seq = seq;
  p->sealed = p->pool->Take(length == 0 ? 1 : length);
  if (!in.rendezvous) {  // the bytes are here
    if (length > 0) std::memcpy(p->sealed.get(), in.data, length);
    lock.Unlock();
    conn.Answering();
    conn.Complete(p, static_cast<ssize_t>(length));
    return PeerTransport::Receipt::kDone;
  }
  p->phase = PeerRequest::kReceiving;
  lock.Unlock();
  return connections_->transport()->Receive(
      in, p->sealed.get(), length, [this, p, length](bool ok) {
        PeerConnection& conn = connections_->connection(p->peer);
        if (ok) conn.Answering();  // it answers: retry soon if it fails later
        conn.Complete(p, ok ? static_cast<ssize_t>(length) : -ECONNRESET);
      });
}

// The latency of an answer, from the request sent to its first byte back
// (hedge_time.h: the hedge time is its p99 within bounds).
void PeerAnswers::Answered(PeerLink& l, const PeerRequest& p) {
  l.hedge_time.Record(std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - p.sent_at));
}

}  // namespace tierfs
