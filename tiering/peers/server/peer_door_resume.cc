// PeerDoor: the end of every handshake that leaves a session (Conclude),
// and a Resume in place of a hello (session_resumption.h), answered on the
// door's thread: a ticket is looked up and an HMAC checked, with no munged
// round trip; a refusal is answered so that the client can go on with a
// hello on the same connection.
#include <sys/socket.h>

#include <cstring>

#include "tiering/base/log.h"
#include "tiering/peers/secure/door_puzzle.h"
#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/server/peer_door.h"
#include "tiering/peers/server/peer_door_internal.h"

namespace tierfs {

uint64_t RandomSessionId() {
  for (;;) {
    PeerNonce n = RandomNonce();
    uint64_t id = 0;
    std::memcpy(&id, n.data(), sizeof id);
    if (id != 0) return id;
  }
}

void PeerDoor::Conclude(Conn& c, AcceptedSession s, const std::string& answer,
                        std::atomic<uint64_t>& counter) {
  if ((options_.serving && !options_.serving()) || answer.empty()) {
    counters_.busy++;
    Close(c.fd);
    return;
  }
  const PeerKey resume = s.keys.resume;
  const std::string peer = s.peer;
  {
    MutexLock lock(mu_);
    if (sessions_.size() >= options_.max_sessions) {
      counters_.busy++;
      Close(c.fd);
      return;
    }
    const uint64_t id = s.id;
    sessions_[id] = Waiting{std::move(s), std::chrono::steady_clock::now() + options_.session_ttl};
  }
  tickets_.Issue(resume, peer);
  // Counted before the answer leaves: a peer that holds its session sees
  // the counter that counts it.
  counter++;
  std::string framed = Framed(answer);
  [[maybe_unused]] ssize_t n =
      ::send(c.fd, framed.data(), framed.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  Close(c.fd);
}

void PeerDoor::OnResume(Conn& c) {
  ResumeRequest r;
  if (c.resume_tried || !DecodeResumeFrame(c.reader.frame(), &r)) {
    counters_.garbage++;
    Close(c.fd);
    return;
  }
  if (!PuzzleSolved(c.nonce, r.solution, c.bits)) {  // as for a hello: work first
    counters_.unsolved++;
    Close(c.fd);
    return;
  }
  c.resume_tried = true;
  TicketStore::Resumed done = tickets_.Resume(auth_->self(), c.nonce, c.reader.frame(), r);
  if (done.refusal) {
    const ResumeRefusal why = *done.refusal;
    const uint64_t n = ++counters_.resume_refused[static_cast<int>(why)];
    // A restarted daemon's peers come with tickets it no longer holds: normal.
    const bool normal = why == ResumeRefusal::kUnknown || why == ResumeRefusal::kExpired;
    constexpr const char* kSaid =
        "peer service: a resumption refused ({}); a full handshake may follow";
    if (normal) {
      TIERFS_LOG(kDebug, kSaid, ResumeRefusalKey(why));
    } else if (LogSampled(n)) {
      TIERFS_LOG(kWarning, kSaid, ResumeRefusalKey(why));
    }
    std::string frame = Framed(EncodeResumedFrame(why, {}, 0, {}, {}));
    if (::send(c.fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(frame.size())) {
      Close(c.fd);
      return;
    }
    c.reader.Reset();  // a hello may follow, answering the same greeting
    return;
  }
  AcceptedSession s;
  s.id = RandomSessionId();
  s.peer = std::move(done.peer);
  s.keys = done.keys;
  Conclude(c, s,
           EncodeResumedFrame(std::nullopt, done.server_key, s.id, done.keys.send, WorkerAddress()),
           counters_.resumed);
}

void PeerDoor::VisitResumeCounters(CounterVisitor& v) const {
  v.Counter("resumed", counters_.resumed,
            {"Sessions resumed by a ticket of an earlier one, without MUNGE."});
  v.Gauge("resume_tickets", tickets_.size(),
          {"Tickets this node holds for sessions its peers may resume (spent ones until they "
           "expire)."});
  v.Counter("resume_tickets_evicted", tickets_.evicted(),
            {"Tickets dropped unused before they expired, to make room."});
  v.BeginGroup("resume_refused");
  static constexpr std::pair<ResumeRefusal, std::string_view> kRefused[] = {
      {ResumeRefusal::kUnknown,
       "Resumptions refused: no such ticket here (never issued, dropped, or this daemon "
       "restarted)."},
      {ResumeRefusal::kExpired, "Resumptions refused: the ticket had expired."},
      {ResumeRefusal::kReplayed, "Resumptions refused: the ticket was used already."},
      {ResumeRefusal::kForged, "Resumptions refused: the proof of the ticket did not verify."},
      {ResumeRefusal::kWrongJob, "Resumptions refused: for another job."},
      {ResumeRefusal::kWrongPeer, "Resumptions refused: for another node, or another node's."},
  };
  for (const auto& [r, help] : kRefused) {
    v.Counter(ResumeRefusalKey(r), counters_.resume_refused[static_cast<int>(r)], {help});
  }
  v.EndGroup();
}

}  // namespace tierfs
