// PeerDoor: the handshake's steps on an accepted connection (the hello,
// its check on the pool, the answer, the key confirmation that leaves a
// session); the listening and accepting are peer_door.cc's.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tiering/base/log.h"
#include "tiering/peers/secure/door_puzzle.h"
#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/server/peer_door.h"
#include "tiering/peers/server/peer_door_internal.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {
void PeerDoor::OnReadable(Conn& c) {
  if (c.state == Conn::kWaiting || c.state == Conn::kChecking) {  // only EOF may come now
    char b;
    ssize_t r = ::recv(c.fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);
    if (r == 0 || (r < 0 && errno != EAGAIN))
      Close(c.fd);
    else if (r > 0) {
      counters_.garbage++;
      Close(c.fd);
    }
    return;
  }
  FrameReader::Result r = c.reader.Feed(c.fd);
  if (r == FrameReader::kMore) return;
  if (r != FrameReader::kDone) {
    if (r == FrameReader::kBad) counters_.garbage++;
    Close(c.fd);
    return;
  }
  if (c.state == Conn::kAwaitHello && IsResumeFrame(c.reader.frame())) {
    OnResume(c);
    return;
  }
  if (c.state == Conn::kAwaitHello) {
    std::string_view cred;
    uint64_t solution = 0;
    if (!DecodeHelloFrame(c.reader.frame(), &cred, &solution)) {
      counters_.garbage++;
      Close(c.fd);
      return;
    }
    if (!PuzzleSolved(c.nonce, solution, c.bits)) {  // one hash, before munged is asked
      counters_.unsolved++;
      Close(c.fd);
      return;
    }
    c.hello.assign(cred);
    c.state = Conn::kWaiting;
    sources_.Wait(c.source, DoorSources::HelloTicket{c.fd, c.id});
    Dispatch();
    return;
  }
  // kAwaitBind: the client's key confirmation.
  if (!DecodeBindFrame(c.reader.frame(), c.keys.recv)) {
    counters_.garbage++;
    Close(c.fd);
    return;
  }
  AcceptedSession s;
  s.id = RandomSessionId();
  s.peer = c.peer;
  s.keys = c.keys;
  Conclude(c, s, EncodeBindAnswerFrame(c.keys.send, s.id, WorkerAddress()),
           counters_.authenticated);
}

void PeerDoor::SetWorkerAddress(std::string worker_address) {
  MutexLock lock(mu_);
  worker_address_ = std::move(worker_address);
  sessions_.clear();
}

std::string PeerDoor::WorkerAddress() const {
  MutexLock lock(mu_);
  return worker_address_;
}

void PeerDoor::Dispatch() {
  DoorSources::HelloTicket t;
  bool reserved = false;
  while (checks_pending_ < kDoorChecksAtOnce && sources_.Next(&t, &reserved)) {
    auto it = conns_.find(t.fd);
    if (it == conns_.end() || it->second->id != t.conn) continue;  // closed meanwhile
    Conn& c = *it->second;
    auto job = std::make_shared<Checked>();
    job->fd = c.fd;
    job->conn = c.id;
    PeerNonce nonce = c.nonce;
    bool queued = checks_.Submit([this, job, hello = std::move(c.hello), nonce] {
      job->hello = AnswerHello(*auth_, nonce, hello);
      {
        MutexLock lock(mu_);
        checked_.push_back(std::make_unique<Checked>(std::move(*job)));
      }
      uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
    });
    c.state = Conn::kChecking;
    if (!queued) {  // the pool shut down
      counters_.busy++;
      Close(c.fd);
      continue;
    }
    ++checks_pending_;
    counters_.checks++;
    if (reserved) counters_.reserved_checks++;
  }
}

void PeerDoor::OnChecked(Checked& r) {
  auto it = conns_.find(r.fd);
  if (it == conns_.end() || it->second->id != r.conn) return;  // evicted or timed out meanwhile
  Conn& c = *it->second;
  std::string frame;
  if (r.hello.verdict != AuthVerdict::kOk) {
    uint64_t n = ++counters_.refused[static_cast<int>(r.hello.verdict)];
    if (LogSampled(n)) {
      TIERFS_LOG(kWarning, "peer service: hello refused ({}): {}", AuthVerdictName(r.hello.verdict),
                 r.hello.detail);
    }
    frame = Framed(EncodeAnswerFrame(static_cast<int32_t>(WireError::kDenied), {}));
    [[maybe_unused]] ssize_t n2 =
        ::send(c.fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    Close(c.fd);
    return;
  }
  frame = Framed(EncodeAnswerFrame(0, r.hello.answer));
  if (::send(c.fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(frame.size())) {
    Close(c.fd);
    return;
  }
  c.state = Conn::kAwaitBind;
  c.peer = std::move(r.hello.peer);
  c.keys = r.hello.keys;
  c.reader.Reset();
}

}  // namespace tierfs
