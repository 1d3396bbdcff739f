// Fuzz target: the server's half of the handshake (AnswerHello,
// peer_handshake.h), what the door runs on a hello that solved its puzzle.
// MUNGE is replaced by a fake whose credential is "FAKE", the maker's uid
// and gid (u32 each) and the payload in the clear, so that every check
// after munged's is reached:
//   first byte % 2 == 0: the rest is the hello's credential, as sent;
//   == 1: a hello made from the input: a byte of flags (bit 0: another uid,
//       1: another gid, 2: the answer's role, 3: another greeting's nonce,
//       4: another job, 5: addressed to another node, 6: the client's key
//       from the input, 7: one payload byte altered), the byte to alter,
//       32 bytes of key (bit 6), then the client's name.
// It aborts on any breach of:
//   - a hello accepted answers with a credential of this node, of its job,
//     addressed to the hello's sender, echoing the hello's nonce;
//   - a hello refused says why;
//   - a hello made from the input gets the verdict its flags call for;
//   - when the client made its key, both sides derive the same keys.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/transport/peer_crypto.h"

namespace tierfs {
namespace {

constexpr uid_t kUid = 1000;
constexpr gid_t kGid = 100;
constexpr std::string_view kMagic = "FAKE";

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "peer_answer_fuzz: %s\n", what);
  std::abort();
}

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint32_t GetU32(std::string_view s) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(s[i])} << (8 * i);
  return v;
}

std::string FakeCred(uid_t uid, gid_t gid, std::string_view payload) {
  std::string cred(kMagic);
  PutU32(&cred, uid);
  PutU32(&cred, gid);
  cred += payload;
  return cred;
}

// MUNGE without munged: anyone may make anything, so only the checks
// PeerAuth and AnswerHello make on a decoded credential are under test.
class FakeCredentials final : public Credentials {
 public:
  Result<std::string> Encode(std::string_view payload, uid_t, int) const override {
    return FakeCred(kUid, kGid, payload);
  }
  Decoded Decode(std::string_view cred) const override {
    Decoded d;
    if (cred.size() < kMagic.size() + 8 || cred.substr(0, kMagic.size()) != kMagic) {
      d.detail = "not a fake credential";
      return d;
    }
    d.verdict = AuthVerdict::kOk;
    d.uid = GetU32(cred.substr(kMagic.size()));
    d.gid = GetU32(cred.substr(kMagic.size() + 4));
    d.payload = cred.substr(kMagic.size() + 8);
    return d;
  }
};

const PeerAuth& Auth() {
  static const PeerAuth auth(PeerIdentity{"job-1", "n0", kUid, kGid},
                             std::make_unique<FakeCredentials>());
  return auth;
}

PeerNonce Greeting() {
  PeerNonce n{};
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(0xA0 + i);
  return n;
}

// What every answer must be, whatever the hello.
void CheckAnswer(std::string_view hello, const HelloAnswer& a) {
  if (a.verdict != AuthVerdict::kOk) {
    if (a.detail.empty()) Fail("a refused hello without a reason");
    return;
  }
  FakeCredentials fake;
  Credentials::Decoded in = fake.Decode(hello);
  PeerClaim asked;
  if (in.verdict != AuthVerdict::kOk || in.uid != kUid || in.gid != kGid ||
      !DecodeClaim(in.payload, &asked) || asked.role != PeerClaim::kHello || asked.job != "job-1" ||
      asked.to != "n0" || asked.echo != Greeting()) {
    Fail("a hello accepted that is not this node's job's, user's, greeting's");
  }
  Credentials::Decoded out = fake.Decode(a.answer);
  PeerClaim answer;
  if (out.verdict != AuthVerdict::kOk || !DecodeClaim(out.payload, &answer)) {
    Fail("an answer that is not a credential of a claim");
  }
  if (answer.role != PeerClaim::kAnswer || answer.job != "job-1" || answer.from != "n0" ||
      answer.to != asked.from || answer.echo != asked.nonce || a.peer != asked.from) {
    Fail("an answer not made for the hello it answers");
  }
}

void Raw(std::string_view in) { CheckAnswer(in, AnswerHello(Auth(), Greeting(), in)); }

void Made(std::string_view in) {
  if (in.size() < 2) return;
  const auto flags = static_cast<uint8_t>(in[0]);
  const auto alter = static_cast<uint8_t>(in[1]);
  in.remove_prefix(2);
  PeerKeyPair client;
  PeerClaim hello{PeerClaim::kHello, RandomNonce(), Greeting(), {}, "job-1", "", "n0"};
  if (flags & 0x04) hello.role = PeerClaim::kAnswer;
  if (flags & 0x08) hello.echo[0] ^= 1;
  if (flags & 0x10) hello.job = "job-2";
  if (flags & 0x20) hello.to = "n9";
  const bool input_key = flags & 0x40;
  if (input_key) {
    if (in.size() < hello.key.size()) return;
    std::memcpy(hello.key.data(), in.data(), hello.key.size());
    in.remove_prefix(hello.key.size());
  } else {
    if (!NewPeerKeyPair(&client)) return;
    hello.key = client.pub;
  }
  hello.from = std::string(in.substr(0, 300));
  std::string payload = EncodeClaim(hello);
  const bool altered = flags & 0x80;
  if (altered) payload[alter % payload.size()] ^= 0x5A;
  std::string cred = FakeCred(kUid + (flags & 0x01), kGid + ((flags & 0x02) >> 1), payload);
  HelloAnswer a = AnswerHello(Auth(), Greeting(), cred);
  CheckAnswer(cred, a);
  if (altered) return;  // the verdict depends on the byte: the checks above suffice

  const bool from_ok = !hello.from.empty() && hello.from.size() <= kMaxClaimField &&
                       hello.from.find('\0') == std::string::npos;
  AuthVerdict want = AuthVerdict::kOk;
  if (flags & 0x03)
    want = AuthVerdict::kWrongUser;
  else if ((flags & 0x04) || !from_ok)
    want = AuthVerdict::kInvalid;
  else if (flags & 0x10)
    want = AuthVerdict::kWrongJob;
  else if (flags & 0x28)
    want = AuthVerdict::kWrongPeer;
  if (a.verdict != want && !(input_key && want == AuthVerdict::kOk &&
                             a.verdict == AuthVerdict::kInvalid)) {  // a key X25519 refuses
    Fail("a made hello got another verdict than its flags call for");
  }
  if (a.verdict != AuthVerdict::kOk || input_key) return;
  PeerClaim answer;
  FakeCredentials fake;
  if (!DecodeClaim(fake.Decode(a.answer).payload, &answer)) Fail("the answer does not decode");
  SessionKeys keys;
  std::string transcript = HandshakeTranscript(Greeting(), hello.nonce, hello.key, answer.key,
                                               "job-1", hello.from, "n0");
  if (!DeriveSessionKeys(client.priv, answer.key, transcript, /*client=*/true, &keys) ||
      keys.send != a.keys.recv || keys.recv != a.keys.send) {
    Fail("the two sides derive different keys");
  }
}

}  // namespace
}  // namespace tierfs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 20000) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0)
    tierfs::Raw(in);
  else
    tierfs::Made(in);
  return 0;
}
