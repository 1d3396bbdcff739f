#include "tiering/peers/secure/peer_handshake.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "tiering/peers/secure/door_puzzle.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    int left = MillisLeft(deadline);
    if (left == 0) return false;
    struct pollfd p {
      fd, events, 0
    };
    int r = ::poll(&p, 1, left);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

bool WriteAll(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!WaitFor(fd, POLLOUT, deadline)) return false;
    } else {
      return false;
    }
  }
  return true;
}

// Reads one frame by `deadline`.
FrameReader::Result ReadFrame(int fd, FrameReader* reader, Clock::time_point deadline) {
  for (;;) {
    FrameReader::Result r = reader->Feed(fd);
    if (r != FrameReader::kMore) return r;
    if (!WaitFor(fd, POLLIN, deadline)) return FrameReader::kClosed;
  }
}

// Binds `fd` to a free port of `ports`, from a few tried at random outside
// ip_local_reserved_ports. False if none is free or this process may not
// bind them.
bool BindSourcePort(int fd, SourcePort ports) {
  static std::atomic<bool> denied{false};  // EACCES once: not root
  if (denied.load(std::memory_order_relaxed)) return false;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  for (uint16_t port : SourcePortCandidates(ports, LocalReservedPorts(), RandomNonce())) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return true;
    if (errno == EACCES || errno == EPERM) {
      denied = true;
      return false;
    }
  }
  return false;
}

Status NoFrame(const char* what, FrameReader::Result r) {
  return Status::Error(
      kHandshakeUnreachable,
      fmt::format("{}: {}", what,
                  r == FrameReader::kBad ? "a bad frame" : "closed or no answer in time"));
}

// Client keeps a ticket a little less long than the server: it filed it a
// round trip earlier.
constexpr std::chrono::seconds kTicketMargin{10};

// Offers `ticket` in place of a hello. Ok with out->resumed (the session),
// or with out->refused (the full handshake follows); an error otherwise.
Status Resume(int fd, FrameReader* reader, const ResumeTicket& ticket, const PeerNonce& greeting,
              uint64_t solution, const PeerIdentity& self, const std::string& server,
              Clock::time_point deadline, ClientSession* out) {
  ResumeAttempt attempt;
  if (!StartResume(ticket, greeting, solution, self, server, &attempt)) {
    return Status::Error(kHandshakeLocal, "cannot make a key pair");
  }
  if (!WriteAll(fd, Framed(attempt.frame), deadline)) {
    return Status::Error(kHandshakeUnreachable, "cannot send the resumption");
  }
  reader->Reset();
  if (FrameReader::Result r = ReadFrame(fd, reader, deadline); r != FrameReader::kDone) {
    return NoFrame("resumption", r);
  }
  PeerKey server_key;
  if (!DecodeResumedFrame(reader->frame(), &out->refused, &server_key)) {
    return Status::Error(kHandshakeGarbage, "the answer to our resumption does not decode");
  }
  if (out->refused) return Status::Ok();
  if (!ResumedKeys(ticket, greeting, attempt, server_key, &out->keys) ||
      !OpenResumedFrame(reader->frame(), out->keys.recv, &out->session, &out->worker_address)) {
    return Status::Error(kHandshakeBadPeer, "the answer to our resumption does not authenticate");
  }
  out->resumed = true;
  return Status::Ok();
}

}  // namespace

Result<int> ConnectTcp(const std::string& host, uint16_t port, Clock::time_point deadline,
                       SourcePort from) {
  struct addrinfo hints {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  int e = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (e != 0 || res == nullptr) {
    return Status::Error(EHOSTUNREACH, fmt::format("cannot resolve {}: {}", host, gai_strerror(e)));
  }
  int fd = -1, err = 0;
  for (bool reserved : {from.reserved(), false}) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = errno;
      ::freeaddrinfo(res);
      return Status::FromErrno(err, "socket");
    }
    if (reserved && !BindSourcePort(fd, from)) {
      ::close(fd);
      continue;
    }
    err = ::connect(fd, res->ai_addr, res->ai_addrlen) == 0 ? 0 : errno;
    // The port's pair with the door is still in use (TIME_WAIT): any port.
    if (!(reserved && err == EADDRNOTAVAIL)) break;
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (err == EINPROGRESS) {
    if (!WaitFor(fd, POLLOUT, deadline)) {
      err = ETIMEDOUT;
    } else {
      socklen_t len = sizeof err;
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
  }
  if (err != 0) {
    ::close(fd);
    return Status::FromErrno(err, fmt::format("connect to {}:{}", host, port));
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

HandshakeResult HandshakeFailure(const Status& s) {
  switch (s.code()) {
    case 0:
      return HandshakeResult::kOk;
    case kHandshakeRefused:
      return HandshakeResult::kRefused;
    case kHandshakeBadPeer:
      return HandshakeResult::kBadPeer;
    case kHandshakeGarbage:
      return HandshakeResult::kGarbage;
    case kHandshakeLocal:
      return HandshakeResult::kLocal;
    default:
      return HandshakeResult::kUnreachable;
  }
}

Result<ClientSession> RunClientHandshake(int fd, const PeerAuth& auth, const std::string& server,
                                         Clock::time_point deadline, const ResumeTicket* ticket) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  FrameReader reader;
  auto read = [&](const char* what) {
    FrameReader::Result r = ReadFrame(fd, &reader, deadline);
    return r == FrameReader::kDone ? Status::Ok() : NoFrame(what, r);
  };
  if (Status s = read("greeting"); !s.ok()) return s;
  PeerNonce server_nonce;
  unsigned bits = 0;
  if (!DecodeGreeting(reader.frame(), &server_nonce, &bits)) {
    return Status::Error(kHandshakeGarbage, "the greeting does not decode");
  }
  uint64_t solution = 0;  // the door is under a flood: it asks for work first
  if (!SolvePuzzle(server_nonce, bits, deadline, &solution)) {
    return Status::Error(kHandshakeUnreachable,
                         fmt::format("no solution to the door's puzzle ({} bits) in time", bits));
  }
  const PeerIdentity& self = auth.self();
  ClientSession out;
  if (ticket != nullptr && Clock::now() < ticket->expires) {
    if (Status s =
            Resume(fd, &reader, *ticket, server_nonce, solution, self, server, deadline, &out);
        !s.ok()) {
      return s;
    }
    if (out.resumed) {
      out.ticket = TicketOf(out.keys.resume, Clock::now() + kTicketLifetime - kTicketMargin);
      return out;
    }
  }
  PeerKeyPair mine;
  if (!NewPeerKeyPair(&mine)) return Status::Error(kHandshakeLocal, "cannot make a key pair");
  PeerClaim hello{PeerClaim::kHello, RandomNonce(), server_nonce, mine.pub,
                  self.job,          self.name,     server};
  Result<std::string> cred = auth.Make(hello);
  if (!cred.ok()) return Status::Error(kHandshakeLocal, cred.status().message());
  if (!WriteAll(fd, Framed(EncodeHelloFrame(*cred, solution)), deadline)) {
    return Status::Error(kHandshakeUnreachable, "cannot send the hello");
  }
  reader.Reset();
  if (Status s = read("answer"); !s.ok()) return s;
  int32_t refusal = 0;
  std::string_view answer_cred;
  if (!DecodeAnswerFrame(reader.frame(), &refusal, &answer_cred)) {
    return Status::Error(kHandshakeGarbage, "the answer does not decode");
  }
  if (refusal != 0) {
    return Status::Error(
        kHandshakeRefused,
        fmt::format("the peer refused our hello ({})",
                    std::strerror(-WireErrorToErrno(static_cast<WireError>(refusal)))));
  }
  AuthCheck answer = auth.Check(answer_cred, PeerClaim::kAnswer);
  if (answer.ok() && answer.claim.from != server) {
    answer.verdict = AuthVerdict::kWrongPeer;
    answer.detail = fmt::format("the answer comes from \"{}\"", answer.claim.from);
  } else if (answer.ok() && answer.claim.echo != hello.nonce) {
    answer.verdict = AuthVerdict::kWrongPeer;
    answer.detail = "the answer does not echo our hello";
  }
  if (!answer.ok()) {
    return Status::Error(
        answer.verdict == AuthVerdict::kUnavailable ? kHandshakeLocal : kHandshakeBadPeer,
        fmt::format("its answer is refused ({}): {}", AuthVerdictName(answer.verdict),
                    answer.detail));
  }
  std::string transcript = HandshakeTranscript(server_nonce, hello.nonce, mine.pub,
                                               answer.claim.key, self.job, self.name, server);
  if (!DeriveSessionKeys(mine.priv, answer.claim.key, transcript, /*client=*/true, &out.keys)) {
    return Status::Error(kHandshakeBadPeer, "the peer's key is invalid");
  }
  std::string bind = EncodeBindFrame(out.keys.send);
  if (bind.empty() || !WriteAll(fd, Framed(bind), deadline)) {
    return Status::Error(kHandshakeUnreachable, "cannot send the key confirmation");
  }
  reader.Reset();
  if (Status s = read("address"); !s.ok()) return s;
  if (!DecodeBindAnswerFrame(reader.frame(), out.keys.recv, &out.session, &out.worker_address)) {
    return Status::Error(kHandshakeGarbage, "the peer's address does not authenticate");
  }
  out.ticket = TicketOf(out.keys.resume, Clock::now() + kTicketLifetime - kTicketMargin);
  return out;
}

HelloAnswer AnswerHello(const PeerAuth& auth, const PeerNonce& greeting, std::string_view hello) {
  HelloAnswer out;
  AuthCheck check = auth.Check(hello, PeerClaim::kHello);
  out.verdict = check.verdict;
  out.detail = std::move(check.detail);
  if (out.verdict == AuthVerdict::kOk && check.claim.echo != greeting) {
    out.verdict = AuthVerdict::kWrongPeer;  // made for another listener's greeting
    out.detail = "the hello answers another greeting (captured and replayed?)";
  }
  if (out.verdict != AuthVerdict::kOk) return out;
  const PeerClaim& claim = check.claim;
  out.peer = claim.from;
  PeerKeyPair mine;
  if (!NewPeerKeyPair(&mine)) {
    out.verdict = AuthVerdict::kUnavailable;
    out.detail = "cannot make a key pair";
    return out;
  }
  const PeerIdentity& self = auth.self();
  std::string transcript = HandshakeTranscript(greeting, claim.nonce, claim.key, mine.pub, self.job,
                                               claim.from, self.name);
  if (!DeriveSessionKeys(mine.priv, claim.key, transcript, /*client=*/false, &out.keys)) {
    out.verdict = AuthVerdict::kInvalid;
    out.detail = "the hello's key is invalid";
    return out;
  }
  PeerClaim answer{PeerClaim::kAnswer, RandomNonce(), claim.nonce, mine.pub,
                   self.job,           self.name,     claim.from};
  Result<std::string> cred = auth.Make(answer);
  if (!cred.ok()) {
    out.verdict = AuthVerdict::kUnavailable;
    out.detail = cred.status().message();
    return out;
  }
  out.answer = std::move(*cred);
  return out;
}

}  // namespace tierfs
