#include "tiering/peer/peer_handshake.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tiering/peer/door_puzzle.h"
#include "tiering/peer/wire.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kGreetingMagic = 0x47534654;    // "TFSG"
constexpr uint32_t kHelloMagic = 0x48534654;       // "TFSH"
constexpr uint32_t kAnswerMagic = 0x52534654;      // "TFSR"
constexpr uint32_t kBindMagic = 0x42534654;        // "TFSB"
constexpr uint32_t kBindAnswerMagic = 0x43534654;  // "TFSC"
constexpr uint8_t kHandshakeVersion = 3;

void Put(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t Get(std::string_view s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(s[at + i])} << (8 * i);
  return v;
}

// magic | version | 3 reserved bytes
std::string Start(uint32_t magic) {
  std::string out;
  Put(&out, magic, 4);
  Put(&out, kHandshakeVersion, 1);
  Put(&out, 0, 3);
  return out;
}
bool Started(std::string_view f, uint32_t magic, size_t min_size) {
  return f.size() >= min_size && f.size() >= 8 && Get(f, 0, 4) == magic &&
         Get(f, 4, 1) == kHandshakeVersion && Get(f, 5, 3) == 0;
}

template <typename T>
void Append(std::string* out, const T& bytes) {
  out->append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// Seals `body` at sequence 1; the frame so far is the AAD. Then tag, ciphertext.
bool SealInto(std::string* frame, const PeerKey& key, std::string_view body) {
  std::string aad = *frame;
  std::string cipher(body.size(), '\0');
  PeerTag tag;
  if (!SealMessage(key, 1, aad, body.data(), body.size(), cipher.data(), &tag)) return false;
  Append(frame, tag);
  *frame += cipher;
  return true;
}
bool OpenFrom(std::string_view frame, size_t header, const PeerKey& key, std::string* body) {
  if (frame.size() < header + 16) return false;
  PeerTag tag;
  std::memcpy(tag.data(), frame.data() + header, 16);
  std::string_view cipher = frame.substr(header + 16);
  if (cipher.empty() || cipher.size() > kMaxWorkerAddress) return false;
  std::string plain(cipher.size(), '\0');
  if (!OpenMessage(key, 1, frame.substr(0, header), cipher.data(), cipher.size(), plain.data(),
                   tag)) {
    return false;
  }
  *body = std::move(plain);
  return true;
}

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

}  // namespace

std::string HandshakeTranscript(const PeerNonce& server_nonce, const PeerNonce& client_nonce,
                                const PeerKey& client_key, const PeerKey& server_key,
                                std::string_view job, std::string_view client,
                                std::string_view server) {
  std::string t = "tierfs handshake v2";
  Append(&t, server_nonce);
  Append(&t, client_nonce);
  Append(&t, client_key);
  Append(&t, server_key);
  for (std::string_view s : {job, client, server}) {
    Put(&t, s.size(), 2);
    t += s;
  }
  return t;
}

// magic | version | reserved | nonce | bits u8 | 7 reserved
std::string EncodeGreeting(const PeerNonce& nonce, unsigned bits) {
  std::string f = Start(kGreetingMagic);
  Append(&f, nonce);
  Put(&f, bits, 1);
  Put(&f, 0, 7);
  return f;
}
bool DecodeGreeting(std::string_view f, PeerNonce* nonce, unsigned* bits) {
  const size_t size = 8 + nonce->size() + 8;
  if (!Started(f, kGreetingMagic, size) || f.size() != size) return false;
  const size_t at = 8 + nonce->size();
  const auto asked = static_cast<unsigned>(Get(f, at, 1));
  if (asked > kMaxPuzzleBits || Get(f, at + 1, 7) != 0) return false;
  std::memcpy(nonce->data(), f.data() + 8, nonce->size());
  if (bits != nullptr) *bits = asked;
  return true;
}

// magic | version | reserved | solution u64 | credential
std::string EncodeHelloFrame(std::string_view cred, uint64_t solution) {
  std::string f = Start(kHelloMagic);
  Put(&f, solution, 8);
  f += cred;
  return f;
}
bool DecodeHelloFrame(std::string_view f, std::string_view* cred, uint64_t* solution) {
  if (!Started(f, kHelloMagic, 17) || f.size() - 16 > kMaxCredential) return false;
  if (solution != nullptr) *solution = Get(f, 8, 8);
  *cred = f.substr(16);
  return true;
}

std::string EncodeAnswerFrame(int32_t refusal, std::string_view cred) {
  std::string f = Start(kAnswerMagic);
  Put(&f, static_cast<uint32_t>(refusal), 4);
  if (refusal == 0) f += cred;
  return f;
}
bool DecodeAnswerFrame(std::string_view f, int32_t* refusal, std::string_view* cred) {
  if (!Started(f, kAnswerMagic, 12)) return false;
  auto r = static_cast<int32_t>(Get(f, 8, 4));
  std::string_view c = f.substr(12);
  // Refused: a known error and nothing else. Accepted: a credential.
  if (r < 0 || r > kMaxWireError || (r != 0) != c.empty() || c.size() > kMaxCredential)
    return false;
  *refusal = r;
  *cred = c;
  return true;
}

constexpr std::string_view kBindText = "tierfs: the client holds the keys";

std::string EncodeBindFrame(const PeerKey& key) {
  std::string f = Start(kBindMagic);
  return SealInto(&f, key, kBindText) ? f : std::string();
}
bool DecodeBindFrame(std::string_view f, const PeerKey& key) {
  std::string text;
  return Started(f, kBindMagic, 8) && OpenFrom(f, 8, key, &text) && text == kBindText;
}

std::string EncodeBindAnswerFrame(const PeerKey& key, uint64_t session,
                                  std::string_view worker_address) {
  std::string f = Start(kBindAnswerMagic);
  Put(&f, session, 8);
  return SealInto(&f, key, worker_address) ? f : std::string();
}
bool DecodeBindAnswerFrame(std::string_view f, const PeerKey& key, uint64_t* session,
                           std::string* worker_address) {
  if (!Started(f, kBindAnswerMagic, 16) || !OpenFrom(f, 16, key, worker_address)) return false;
  *session = Get(f, 8, 8);
  return *session != 0;
}

std::string Framed(std::string_view payload) {
  std::string out;
  Put(&out, payload.size(), 4);
  out += payload;
  return out;
}

FrameReader::Result FrameReader::Feed(int fd) {
  for (;;) {
    size_t want = 4;
    if (buf_.size() >= 4) {
      uint64_t n = Get(buf_, 0, 4);
      if (n == 0 || n > kMaxFrame) return kBad;
      want = 4 + n;
    }
    if (buf_.size() == want) {
      if (want > 4) return kDone;
      continue;  // the length just completed
    }
    char tmp[kMaxFrame + 4];
    ssize_t r = ::recv(fd, tmp, want - buf_.size(), MSG_DONTWAIT);
    if (r > 0) {
      buf_.append(tmp, static_cast<size_t>(r));
    } else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
      return kMore;
    } else {
      return kClosed;
    }
  }
}

std::string_view FrameReader::frame() const { return std::string_view(buf_).substr(4); }

int ConnectTcp(const std::string& host, uint16_t port, Clock::time_point deadline,
               std::string* error) {
  struct addrinfo hints {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  int e = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (e != 0 || res == nullptr) {
    *error = fmt::format("cannot resolve {}: {}", host, gai_strerror(e));
    return -1;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = fmt::format("socket: {}", std::strerror(errno));
    ::freeaddrinfo(res);
    return -1;
  }
  int r = ::connect(fd, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  int err = r == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    if (!WaitFor(fd, POLLOUT, deadline)) {
      err = ETIMEDOUT;
    } else {
      socklen_t len = sizeof err;
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
  }
  if (err != 0) {
    *error = fmt::format("connect to {}:{}: {}", host, port, std::strerror(err));
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

HandshakeResult RunClientHandshake(int fd, const PeerAuth& auth, const std::string& server,
                                   Clock::time_point deadline, ClientSession* out,
                                   std::string* error) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  FrameReader reader;
  auto read = [&](const char* what) {
    FrameReader::Result r = ReadFrame(fd, &reader, deadline);
    if (r == FrameReader::kDone) return true;
    *error = fmt::format("{}: {}", what,
                         r == FrameReader::kBad ? "a bad frame" : "closed or no answer in time");
    return false;
  };
  if (!read("greeting")) return HandshakeResult::kUnreachable;
  PeerNonce server_nonce;
  unsigned bits = 0;
  if (!DecodeGreeting(reader.frame(), &server_nonce, &bits)) {
    *error = "the greeting does not decode";
    return HandshakeResult::kGarbage;
  }
  uint64_t solution = 0;  // the door is under a flood: it asks for work first
  if (!SolvePuzzle(server_nonce, bits, deadline, &solution)) {
    *error = fmt::format("no solution to the door's puzzle ({} bits) in time", bits);
    return HandshakeResult::kUnreachable;
  }
  PeerKeyPair mine;
  if (!NewPeerKeyPair(&mine)) {
    *error = "cannot make a key pair";
    return HandshakeResult::kLocal;
  }
  const PeerIdentity& self = auth.self();
  PeerClaim hello{PeerClaim::kHello, RandomNonce(), server_nonce, mine.pub,
                  self.job,          self.name,     server};
  std::string cred;
  if (auth.Make(hello, &cred, error) != 0) return HandshakeResult::kLocal;
  if (!WriteAll(fd, Framed(EncodeHelloFrame(cred, solution)), deadline)) {
    *error = "cannot send the hello";
    return HandshakeResult::kUnreachable;
  }
  reader.Reset();
  if (!read("answer")) return HandshakeResult::kUnreachable;
  int32_t refusal = 0;
  std::string_view answer_cred;
  if (!DecodeAnswerFrame(reader.frame(), &refusal, &answer_cred)) {
    *error = "the answer does not decode";
    return HandshakeResult::kGarbage;
  }
  if (refusal != 0) {
    *error = fmt::format("the peer refused our hello ({})",
                         std::strerror(-WireErrorToErrno(static_cast<WireError>(refusal))));
    return HandshakeResult::kRefused;
  }
  PeerClaim answer;
  std::string detail;
  AuthVerdict v = auth.Check(answer_cred, PeerClaim::kAnswer, &answer, &detail);
  if (v == AuthVerdict::kOk && answer.from != server) {
    v = AuthVerdict::kWrongPeer;
    detail = fmt::format("the answer comes from \"{}\"", answer.from);
  } else if (v == AuthVerdict::kOk && answer.echo != hello.nonce) {
    v = AuthVerdict::kWrongPeer;
    detail = "the answer does not echo our hello";
  }
  if (v != AuthVerdict::kOk) {
    *error = fmt::format("its answer is refused ({}): {}", AuthVerdictName(v), detail);
    return v == AuthVerdict::kUnavailable ? HandshakeResult::kLocal : HandshakeResult::kBadPeer;
  }
  std::string transcript = HandshakeTranscript(server_nonce, hello.nonce, mine.pub, answer.key,
                                               self.job, self.name, server);
  if (!DeriveSessionKeys(mine.priv, answer.key, transcript, /*client=*/true, &out->keys)) {
    *error = "the peer's key is invalid";
    return HandshakeResult::kBadPeer;
  }
  std::string bind = EncodeBindFrame(out->keys.send);
  if (bind.empty() || !WriteAll(fd, Framed(bind), deadline)) {
    *error = "cannot send the key confirmation";
    return HandshakeResult::kUnreachable;
  }
  reader.Reset();
  if (!read("address")) return HandshakeResult::kUnreachable;
  if (!DecodeBindAnswerFrame(reader.frame(), out->keys.recv, &out->session, &out->worker_address)) {
    *error = "the peer's address does not authenticate";
    return HandshakeResult::kGarbage;
  }
  return HandshakeResult::kOk;
}

}  // namespace tierfs
