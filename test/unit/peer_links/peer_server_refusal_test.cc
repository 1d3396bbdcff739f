// PeerServer's door against hellos played by the test: forged, replayed,
// misaddressed, of another job or user, or made for another greeting, and
// a hello captured by whoever held the port first and replayed to the real
// server once it listens. Each is refused and counted, and the server
// keeps serving an honest peer. Floods of hellos and of idle connections
// are in peer_server_flood_test.cc, forged and replayed messages after an
// honest handshake in peer_server_message_test.cc; their fixture is
// peer_server_refusal_fixture.h.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "munge_daemon.h"
#include "peer_fixture.h"
#include "peer_server_refusal_fixture.h"
#include "tiering/peers/secure/door_puzzle.h"
#include "tiering/peers/secure/peer_handshake.h"

namespace tierfs {
namespace {

using namespace testing;

// Reads one frame (blocking, within the socket's timeout); "" if none.
std::string ReadFrameFrom(int fd) {
  uint8_t len[4];
  if (::recv(fd, len, 4, MSG_WAITALL) != 4) return "";
  size_t n = len[0] | len[1] << 8 | len[2] << 16 | static_cast<size_t>(len[3]) << 24;
  std::string f(n, '\0');
  if (n == 0 || n > kMaxFrame || ::recv(fd, f.data(), n, MSG_WAITALL) != static_cast<ssize_t>(n))
    return "";
  return f;
}

void WriteFrame(int fd, std::string_view payload) {
  std::string f = Framed(payload);
  REQUIRE(::send(fd, f.data(), f.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(f.size()));
}

// The door's answer to `cred`, sent on a fresh connection: the refusal code
// (0: accepted), or -1 if the door closed without answering.
int32_t Answer(uint16_t port, const std::function<std::string(const PeerNonce&)>& cred) {
  int fd = Dial(port);
  PeerNonce greeting;
  unsigned bits = 0;
  std::string g = ReadFrameFrom(fd);
  REQUIRE(DecodeGreeting(g, &greeting, &bits));
  // This address has connected more than a real peer would: the work
  // asked of it is done, as a client does.
  uint64_t solution = 0;
  REQUIRE(SolvePuzzle(greeting, bits, Clock::now() + 5s, &solution));
  WriteFrame(fd, EncodeHelloFrame(cred(greeting), solution));
  std::string a = ReadFrameFrom(fd);
  ::close(fd);
  int32_t refusal = -1;
  std::string_view answer;
  if (!a.empty()) REQUIRE(DecodeAnswerFrame(a, &refusal, &answer));
  return refusal;
}

TEST_CASE("peer server: hellos that are forged, misaddressed or not for this greeting are refused",
          "[peer]") {
  if (!PeersCanRun()) return;
  Setup s;
  uint16_t port = s.b->port();
  PeerAuth x(Identity("x"), MungeDaemon::Get()->socket());
  PeerAuth other_job(Identity("x", "job-43"), MungeDaemon::Get()->socket());
  const auto denied = static_cast<int32_t>(WireError::kDenied);

  CHECK(Answer(port, [&](const PeerNonce& g) { return HelloCred(x, g); }) == 0);
  std::string once;
  CHECK(Answer(port, [&](const PeerNonce& g) { return once = HelloCred(x, g); }) == 0);
  CHECK(Answer(port, [&](const PeerNonce&) { return once; }) == denied);
  CHECK(s.b->server().refused(AuthVerdict::kReplayed) == 1);
  CHECK(Answer(port, [&](const PeerNonce& g) {
          std::string c = HelloCred(x, g);
          c[c.size() / 2] ^= 0x01;
          return c;
        }) == denied);
  CHECK(Answer(port, [](const PeerNonce&) { return std::string("hello, let me in"); }) == denied);
  CHECK(s.b->server().refused(AuthVerdict::kInvalid) == 2);
  CHECK(Answer(port, [&](const PeerNonce& g) { return HelloCred(other_job, g); }) == denied);
  CHECK(s.b->server().refused(AuthVerdict::kWrongJob) == 1);
  CHECK(Answer(port, [&](const PeerNonce& g) { return HelloCred(x, g, "c"); }) == denied);
  // Made for a greeting this door never sent: whoever asked for it was not us.
  CHECK(Answer(port, [&](const PeerNonce&) { return HelloCred(x, RandomNonce()); }) == denied);
  CHECK(s.b->server().refused(AuthVerdict::kWrongPeer) == 2);
  if (::geteuid() == 0) {
    CHECK(Answer(port, [&](const PeerNonce& g) {
            PeerClaim claim{PeerClaim::kHello, RandomNonce(), g, {}, kJob, "x", "b"};
            return CredentialAs(65534, claim);
          }) == denied);
    CHECK(s.b->server().refused(AuthVerdict::kWrongUser) == 1);
  } else {
    WARN("not tried without root: a hello made by another user");
  }
  CHECK(s.provider.calls == 0);
  CHECK(s.door().authenticated == 1);  // a's; the two accepted raw hellos never bound
  s.HonestFetchWorks();
}

TEST_CASE("peer server: a hello captured on a squatted port is worthless, the port is retried",
          "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  // The attacker, another user on b's node, binds b's port before b starts.
  uint16_t port = FreePort();
  int squat = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = Loopback(port);
  REQUIRE(::bind(squat, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(squat, 8) == 0);
  TestNode b("b", &provider, kChunk, port);
  b.StartServer();
  CHECK_FALSE(b.server().listening());
  TestNode a("a", &provider, kChunk);
  a.StartClient({{"b", "127.0.0.1", port}});

  // a dials b and meets the attacker, who greets it and keeps its hello.
  timeval tv{5, 0};
  ::setsockopt(squat, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int victim = ::accept(squat, nullptr, nullptr);
  REQUIRE(victim >= 0);
  ::setsockopt(victim, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  WriteFrame(victim, EncodeGreeting(RandomNonce()));
  std::string hello = ReadFrameFrom(victim);
  REQUIRE(!hello.empty());
  // Reset, not closed: a closed connection would hold the port in TIME_WAIT
  // for a minute, and b would only get it then.
  linger reset{1, 0};
  ::setsockopt(victim, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::close(victim);
  ::close(squat);

  // The real b gets the port at a retry, and refuses the captured hello.
  REQUIRE(Within(5s, [&] { return b.server().listening(); }));
  CHECK(b.server().door().listen_failures >= 1);
  int fd = Dial(port);
  PeerNonce greeting;
  REQUIRE(DecodeGreeting(ReadFrameFrom(fd), &greeting));
  std::string_view cred;
  REQUIRE(DecodeHelloFrame(hello, &cred));
  WriteFrame(fd, hello);
  std::string answer = ReadFrameFrom(fd);
  ::close(fd);
  int32_t refusal = 0;
  std::string_view answer_cred;
  REQUIRE(DecodeAnswerFrame(answer, &refusal, &answer_cred));
  CHECK(refusal == static_cast<int32_t>(WireError::kDenied));
  CHECK(b.server().refused(AuthVerdict::kWrongPeer) == 1);
  CHECK(provider.calls == 0);

  // a joins at its next try, and is served.
  REQUIRE(Within(10s, [&] { return a.client().up(0); }));
  std::vector<char> buf(kChunk);
  CHECK(a.client().Fetch(0, Ref("f", 3 * kChunk, 1, kChunk), buf.data(), Clock::now() + 5s) ==
        static_cast<ssize_t>(kChunk));
  CHECK(IsPattern("f", kChunk, buf.data(), kChunk));
  CHECK(b.server().counters().connections == 1);
}

}  // namespace
}  // namespace tierfs
