// The handshake's frames (peer_handshake.h) and a resumption's
// (session_resumption.h): their encodings, the transcript the keys come
// from, and FrameReader.
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "tiering/peers/secure/door_puzzle.h"
#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/secure/session_resumption.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {
namespace {

constexpr uint32_t kGreetingMagic = 0x47534654;    // "TFSG"
constexpr uint32_t kHelloMagic = 0x48534654;       // "TFSH"
constexpr uint32_t kAnswerMagic = 0x52534654;      // "TFSR"
constexpr uint32_t kBindMagic = 0x42534654;        // "TFSB"
constexpr uint32_t kBindAnswerMagic = 0x43534654;  // "TFSC"
constexpr uint32_t kResumeMagic = 0x4d534654;      // "TFSM"
constexpr uint32_t kResumedMagic = 0x4e534654;     // "TFSN"
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

bool IsResumeFrame(std::string_view f) { return f.size() >= 4 && Get(f, 0, 4) == kResumeMagic; }

// magic | version | reserved | solution u64 | ticket | nonce | key |
// job, from, to (u8 length, bytes) | binder
std::string EncodeResumeFrame(const ResumeRequest& r) {
  std::string f = Start(kResumeMagic);
  Put(&f, r.solution, 8);
  Append(&f, r.ticket);
  Append(&f, r.nonce);
  Append(&f, r.key);
  for (const std::string* s : {&r.job, &r.from, &r.to}) {
    if (s->size() > kMaxClaimField) return {};
    Put(&f, s->size(), 1);
    f += *s;
  }
  Append(&f, r.binder);
  return f;
}
bool DecodeResumeFrame(std::string_view f, ResumeRequest* out) {
  ResumeRequest r;
  size_t at = 16 + r.ticket.size() + r.nonce.size() + r.key.size();
  if (!Started(f, kResumeMagic, at + 3 + r.binder.size())) return false;
  r.solution = Get(f, 8, 8);
  std::memcpy(r.ticket.data(), f.data() + 16, r.ticket.size());
  std::memcpy(r.nonce.data(), f.data() + 16 + r.ticket.size(), r.nonce.size());
  std::memcpy(r.key.data(), f.data() + 16 + r.ticket.size() + r.nonce.size(), r.key.size());
  for (std::string* s : {&r.job, &r.from, &r.to}) {
    if (at >= f.size()) return false;
    const size_t n = Get(f, at, 1);
    if (f.size() - at - 1 < n) return false;
    s->assign(f.substr(at + 1, n));
    at += 1 + n;
  }
  if (f.size() - at != r.binder.size()) return false;
  std::memcpy(r.binder.data(), f.data() + at, r.binder.size());
  *out = std::move(r);
  return true;
}

// magic | version | reserved | refusal u32 | accepted: server key | session u64 | tag | sealed
// address
std::string EncodeResumedFrame(std::optional<ResumeRefusal> refusal, const PeerKey& server_key,
                               uint64_t session, const PeerKey& key,
                               std::string_view worker_address) {
  std::string f = Start(kResumedMagic);
  Put(&f, refusal ? static_cast<uint32_t>(*refusal) : 0, 4);
  if (refusal) return f;
  Append(&f, server_key);
  Put(&f, session, 8);
  return SealInto(&f, key, worker_address) ? f : std::string();
}
constexpr size_t kResumedHeader = 12 + 32 + 8;
bool DecodeResumedFrame(std::string_view f, std::optional<ResumeRefusal>* refusal,
                        PeerKey* server_key) {
  if (!Started(f, kResumedMagic, 12)) return false;
  const auto r = static_cast<uint32_t>(Get(f, 8, 4));
  if (r != 0) {
    if (f.size() != 12 || r < static_cast<uint32_t>(ResumeRefusal::kUnknown) ||
        r >= static_cast<uint32_t>(kResumeRefusals)) {
      return false;
    }
    *refusal = static_cast<ResumeRefusal>(r);
    return true;
  }
  if (f.size() < kResumedHeader + 17) return false;
  refusal->reset();
  std::memcpy(server_key->data(), f.data() + 12, server_key->size());
  return true;
}
bool OpenResumedFrame(std::string_view f, const PeerKey& key, uint64_t* session,
                      std::string* worker_address) {
  if (!Started(f, kResumedMagic, kResumedHeader) || Get(f, 8, 4) != 0 ||
      !OpenFrom(f, kResumedHeader, key, worker_address)) {
    return false;
  }
  *session = Get(f, kResumedHeader - 8, 8);
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

}  // namespace tierfs
