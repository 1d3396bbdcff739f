// The peer connection's cryptography and handshake frames: both sides
// derive the same keys only from the same transcript; a sealed frame opens
// only under its key; the replay window accepts each sequence number once;
// frames decode exactly.
#include "tiering/peers/transport/peer_crypto.h"

#include <catch2/catch.hpp>
#include <string>

#include "tiering/peers/secure/door_puzzle.h"
#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {
namespace {

using namespace std::chrono_literals;

TEST_CASE("peer crypto: both sides derive one key per direction from one transcript", "[peer]") {
  PeerKeyPair c, s, m;
  REQUIRE(NewPeerKeyPair(&c));
  REQUIRE(NewPeerKeyPair(&s));
  REQUIRE(NewPeerKeyPair(&m));
  CHECK(c.pub != s.pub);
  SessionKeys ck, sk, other;
  REQUIRE(DeriveSessionKeys(c.priv, s.pub, "transcript", true, &ck));
  REQUIRE(DeriveSessionKeys(s.priv, c.pub, "transcript", false, &sk));
  CHECK(ck.send == sk.recv);
  CHECK(ck.recv == sk.send);
  CHECK(ck.send != ck.recv);
  // Another transcript (a nonce, a name) or a third party's key: other keys.
  REQUIRE(DeriveSessionKeys(s.priv, c.pub, "transcripT", false, &other));
  CHECK(other.recv != ck.send);
  REQUIRE(DeriveSessionKeys(m.priv, c.pub, "transcript", false, &other));
  CHECK(other.recv != ck.send);
  // A low-order point (all zero) gives no secret: refused.
  CHECK_FALSE(DeriveSessionKeys(c.priv, PeerKey{}, "transcript", true, &other));
}

TEST_CASE("peer crypto: sealed bytes open under their key, sequence and header only", "[peer]") {
  PeerKey key{}, wrong{};
  key[5] = 9;
  wrong[5] = 10;
  std::string body(100000, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7);
  std::string sealed(body.size(), '\0'), opened(body.size(), '\0');
  PeerTag tag;
  REQUIRE(SealMessage(key, 42, "header", body.data(), body.size(), sealed.data(), &tag));
  CHECK(sealed != body);
  REQUIRE(OpenMessage(key, 42, "header", sealed.data(), sealed.size(), opened.data(), tag));
  CHECK(opened == body);
  CHECK_FALSE(OpenMessage(wrong, 42, "header", sealed.data(), sealed.size(), opened.data(), tag));
  CHECK_FALSE(OpenMessage(key, 43, "header", sealed.data(), sealed.size(), opened.data(), tag));
  CHECK_FALSE(OpenMessage(key, 42, "Header", sealed.data(), sealed.size(), opened.data(), tag));
  PeerTag bad = tag;
  bad[15] ^= 1;
  CHECK_FALSE(OpenMessage(key, 42, "header", sealed.data(), sealed.size(), opened.data(), bad));
  // In place, both ways.
  std::string in_place = body;
  REQUIRE(SealMessage(key, 1, "", in_place.data(), in_place.size(), in_place.data(), &tag));
  REQUIRE(OpenMessage(key, 1, "", in_place.data(), in_place.size(), in_place.data(), tag));
  CHECK(in_place == body);
}

TEST_CASE("peer crypto: the replay window accepts each sequence number once", "[peer]") {
  ReplayWindow w;
  CHECK_FALSE(w.Accept(0));
  CHECK(w.Accept(1));
  CHECK_FALSE(w.Accept(1));
  CHECK(w.Accept(5));
  CHECK(w.Accept(3));  // late, within the window: once
  CHECK_FALSE(w.Accept(3));
  CHECK(w.Accept(4));
  CHECK(w.Accept(2));
  CHECK_FALSE(w.Accept(5));
  CHECK(w.Accept(5 + ReplayWindow::kWindow));  // 1029
  CHECK_FALSE(w.Accept(5 + ReplayWindow::kWindow));
  CHECK(w.Accept(4 + ReplayWindow::kWindow));
  CHECK_FALSE(w.Accept(5));  // too old to tell: refused
  CHECK(w.Accept(6));        // the oldest the window still tells, not seen
  CHECK_FALSE(w.Accept(6));
  CHECK(w.Accept(100000));
  CHECK_FALSE(w.Accept(100000));
  CHECK(w.Accept(99999));
}

TEST_CASE("peer handshake: frames round-trip and decode exactly", "[peer]") {
  PeerNonce n = RandomNonce(), got{};
  std::string g = EncodeGreeting(n);
  REQUIRE(DecodeGreeting(g, &got));
  CHECK(got == n);
  CHECK_FALSE(DecodeGreeting(g + "x", &got));
  CHECK_FALSE(DecodeGreeting(g.substr(0, g.size() - 1), &got));
  std::string_view cred;
  CHECK_FALSE(DecodeGreeting(EncodeHelloFrame("MUNGE:x"), &got));  // another frame's magic
  REQUIRE(DecodeHelloFrame(EncodeHelloFrame("MUNGE:x"), &cred));
  CHECK(cred == "MUNGE:x");
  CHECK_FALSE(DecodeHelloFrame(EncodeHelloFrame(""), &cred));
  CHECK_FALSE(DecodeHelloFrame(EncodeHelloFrame(std::string(kMaxCredential + 1, 'x')), &cred));
  int32_t refusal = -1;
  std::string answer_frame = EncodeAnswerFrame(0, "MUNGE:y");
  REQUIRE(DecodeAnswerFrame(answer_frame, &refusal, &cred));
  CHECK((refusal == 0 && cred == "MUNGE:y"));
  REQUIRE(DecodeAnswerFrame(EncodeAnswerFrame(6, ""), &refusal, &cred));
  CHECK(refusal == 6);
  CHECK_FALSE(DecodeAnswerFrame(EncodeAnswerFrame(0, ""), &refusal, &cred));  // accepted, no proof
  CHECK_FALSE(DecodeAnswerFrame(EncodeAnswerFrame(99, ""), &refusal, &cred));

  PeerKey key{}, wrong{};
  key[0] = 3;
  std::string address;
  std::string bind = EncodeBindFrame(key);
  REQUIRE(DecodeBindFrame(bind, key));
  CHECK_FALSE(DecodeBindFrame(bind, wrong));
  bind[bind.size() - 1] ^= 1;
  CHECK_FALSE(DecodeBindFrame(bind, key));
  uint64_t session = 0;
  std::string answer = EncodeBindAnswerFrame(key, 77, "server-address");
  REQUIRE(DecodeBindAnswerFrame(answer, key, &session, &address));
  CHECK((session == 77 && address == "server-address"));
  answer[8] = 78;  // the session id is authenticated too
  CHECK_FALSE(DecodeBindAnswerFrame(answer, key, &session, &address));
}

TEST_CASE("peer handshake: both sides' transcripts bind every field", "[peer]") {
  PeerNonce a = RandomNonce(), b = RandomNonce();
  PeerKey k1{}, k2{};
  k1[0] = 1;
  k2[0] = 2;
  std::string t = HandshakeTranscript(a, b, k1, k2, "job", "c", "s");
  CHECK(t == HandshakeTranscript(a, b, k1, k2, "job", "c", "s"));
  CHECK(t != HandshakeTranscript(b, a, k1, k2, "job", "c", "s"));
  CHECK(t != HandshakeTranscript(a, b, k2, k1, "job", "c", "s"));
  CHECK(t != HandshakeTranscript(a, b, k1, k2, "job2", "c", "s"));
  CHECK(t != HandshakeTranscript(a, b, k1, k2, "job", "s", "c"));
  // Lengths are in it: "ab"+"c" is not "a"+"bc".
  CHECK(HandshakeTranscript(a, b, k1, k2, "j", "ab", "c") !=
        HandshakeTranscript(a, b, k1, k2, "j", "a", "bc"));
}

TEST_CASE("door puzzle: solved in bounded work, checked with one hash, carried by the frames",
          "[peer]") {
  const PeerNonce n = RandomNonce();
  uint64_t x = 0;
  CHECK(PuzzleSolved(n, 12345, 0));  // no work asked: anything goes
  REQUIRE(SolvePuzzle(n, 12, std::chrono::steady_clock::now() + 10s, &x));
  CHECK(PuzzleSolved(n, x, 12));
  // A solution is bound to its greeting's nonce. Under another nonce it passes by chance 1 time in
  // 4,096, so of 256 other nonces about 0.06 pass; 4 or more happen once in a million runs, 256
  // when the nonce is ignored.
  int passes_elsewhere = 0;
  for (int i = 0; i < 256; ++i) {
    passes_elsewhere += PuzzleSolved(RandomNonce(), x, 12) ? 1 : 0;
  }
  CHECK(passes_elsewhere <= 3);
  CHECK_FALSE(PuzzleSolved(n, x, kMaxPuzzleBits + 1));
  uint64_t none = 0;  // 20 bits cannot be found in no time
  CHECK_FALSE(SolvePuzzle(n, kMaxPuzzleBits, std::chrono::steady_clock::now(), &none));
  PeerNonce got;
  unsigned bits = 99;
  REQUIRE(DecodeGreeting(EncodeGreeting(n, 12), &got, &bits));
  CHECK((got == n && bits == 12));
  CHECK_FALSE(DecodeGreeting(EncodeGreeting(n, kMaxPuzzleBits + 1), &got, &bits));
  std::string_view cred;
  uint64_t solution = 0;
  REQUIRE(DecodeHelloFrame(EncodeHelloFrame("MUNGE:x", x), &cred, &solution));
  CHECK((cred == "MUNGE:x" && solution == x));
}

}  // namespace
}  // namespace tierfs
