// Session resumption through a real door and real clients (munged behind
// the full handshakes): a connection closed for being unused comes back
// by its ticket, with no MUNGE credential made or checked, again and
// again, and so does one the server evicted to make room; a restarted
// server refuses the ticket and the same connection
// goes on with a full handshake; a captured Resume played again, to the
// same server or another, is refused.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "peer_fixture.h"
#include "tiering/peers/secure/peer_handshake.h"

namespace tierfs {
namespace {

using namespace testing;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kChunk = 1 << 16;
const ChunkRef kRef = Ref("f", 3 * kChunk, 1, kChunk);

uint64_t Refused(const PeerDoorCounters& door, ResumeRefusal why) {
  return door.resume_refused[static_cast<int>(why)].load();
}

// One frame from `fd` within 5 s.
std::string ReadFrameOf(int fd) {
  FrameReader reader;
  const auto deadline = Clock::now() + 5s;
  for (;;) {
    FrameReader::Result r = reader.Feed(fd);
    if (r == FrameReader::kDone) return std::string(reader.frame());
    REQUIRE(r == FrameReader::kMore);
    REQUIRE(Clock::now() < deadline);
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 100);
  }
}

void Send(int fd, std::string_view frame) {
  std::string f = Framed(frame);
  REQUIRE(::send(fd, f.data(), f.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(f.size()));
}

// A full handshake of `auth` with the door on `port` ("b"): its ticket.
ResumeTicket FullHandshake(const PeerAuth& auth, uint16_t port) {
  const ClientSession made = DoorHandshake(auth, port);
  CHECK_FALSE(made.resumed);
  return made.ticket;
}

TEST_CASE("peer resumption: a connection closed unused comes back without MUNGE", "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  TestNode a("a", &provider, kChunk);
  a.connect_at_start = false;
  PeerClientOptions client;
  client.idle_close = 300ms;
  a.StartClient({b.address()}, client);
  std::vector<char> buf(kChunk);
  for (uint64_t round = 1; round <= 3; ++round) {
    CHECK(a.client().Fetch(0, kRef, buf.data(), Clock::now() + 5s) == static_cast<ssize_t>(kChunk));
    CHECK(IsPattern("f", kChunk, buf.data(), kChunk));
    CHECK(a.client().counters(0).ups == round);
    // Closed at both ends for being unused (a kBye), before the next round.
    REQUIRE(Within(3s, [&] { return a.client().counters(0).closed_idle == round; }));
    REQUIRE(Within(3s, [&] { return b.server().counters().byes == round; }));
  }
  // One full handshake; every reconnect after it resumed the last session.
  CHECK(b.server().door().authenticated == 1);
  CHECK(b.server().door().resumed == 2);
  CHECK(a.client().counters(0).resumed == 2);
  CHECK(a.client().counters(0).resume_refused == 0);
  CHECK(a.client().counters(0).downs == 0);
}

TEST_CASE("peer resumption: a session the server evicted to make room comes back without MUNGE",
          "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  PeerServerOptions one;
  one.max_connections = 1;  // each new session evicts the other
  TestNode b("b", &provider, kChunk, 0, one);
  b.StartServer();
  PeerClientOptions client;
  client.dead_after = 30s;  // a ping a second: the evicted one learns it soon
  client.retry_min = 20ms;
  TestNode a("a", &provider, kChunk);
  a.StartClient({b.address()}, client);
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  TestNode c("c", &provider, kChunk);
  c.StartClient({b.address()}, client);
  REQUIRE(Within(5s, [&] { return c.client().up(0); }));
  std::vector<char> buf(kChunk);
  REQUIRE(Within(5s, [&] { return b.server().counters().evicted_sessions >= 1; }));
  // a's session was evicted: told so, it connects again, by its ticket.
  CHECK(a.client().Fetch(0, kRef, buf.data(), Clock::now() + 5s) == static_cast<ssize_t>(kChunk));
  CHECK(Within(5s, [&] { return a.client().counters(0).resets >= 1; }));
  CHECK(Within(5s, [&] { return a.client().counters(0).resumed >= 1; }));
  CHECK(b.server().door().resumed >= 1);
  CHECK(b.server().door().authenticated == 2);  // a's first and c's first, no more
}

TEST_CASE("peer resumption: a restarted server refuses the ticket, and a full handshake follows",
          "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  PeerAuth a(Identity("a"), MungeDaemon::Get()->socket());
  uint16_t port = 0;
  ResumeTicket ticket;
  {
    TestNode b("b", &provider, kChunk);
    b.StartServer();
    port = b.port();
    ticket = FullHandshake(a, port);
  }
  TestNode restarted("b", &provider, kChunk, port);
  restarted.StartServer();
  const auto deadline = Clock::now() + 5s;
  Result<int> fd = ConnectTcp("127.0.0.1", port, deadline);
  REQUIRE(fd.ok());
  Result<ClientSession> made = RunClientHandshake(*fd, a, "b", deadline, &ticket);
  ::close(*fd);
  INFO(made.status().message());
  REQUIRE(made.ok());  // on the same connection
  CHECK_FALSE(made->resumed);
  CHECK(made->refused == ResumeRefusal::kUnknown);
  const PeerDoorCounters& door = restarted.server().door();
  CHECK(Refused(door, ResumeRefusal::kUnknown) == 1);
  CHECK(door.authenticated == 1);
  CHECK(door.resumed == 0);
  // The new session's ticket resumes.
  fd = ConnectTcp("127.0.0.1", port, Clock::now() + 5s);
  REQUIRE(fd.ok());
  Result<ClientSession> again = RunClientHandshake(*fd, a, "b", Clock::now() + 5s, &made->ticket);
  ::close(*fd);
  REQUIRE(again.ok());
  CHECK(again->resumed);
  CHECK(door.resumed == 1);
  CHECK(door.authenticated == 1);
}

TEST_CASE("peer resumption: a captured Resume played again is refused", "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  TestNode c("c", &provider, kChunk);
  c.StartServer();
  PeerAuth a(Identity("a"), MungeDaemon::Get()->socket());
  const ResumeTicket ticket = FullHandshake(a, b.port());

  // The real resume, captured on its way.
  int fd = *ConnectTcp("127.0.0.1", b.port(), Clock::now() + 5s);
  PeerNonce greeting;
  REQUIRE(DecodeGreeting(ReadFrameOf(fd), &greeting));
  ResumeAttempt real;
  REQUIRE(StartResume(ticket, greeting, 0, a.self(), "b", &real));
  Send(fd, real.frame);
  std::optional<ResumeRefusal> refusal;
  PeerKey server_key;
  REQUIRE(DecodeResumedFrame(ReadFrameOf(fd), &refusal, &server_key));
  CHECK_FALSE(refusal);
  ::close(fd);
  CHECK(b.server().door().resumed == 1);

  // Played again to the same server, on a new connection, then to another.
  for (TestNode* to : {&b, &c}) {
    fd = *ConnectTcp("127.0.0.1", to->port(), Clock::now() + 5s);
    REQUIRE(DecodeGreeting(ReadFrameOf(fd), &greeting));
    Send(fd, real.frame);
    REQUIRE(DecodeResumedFrame(ReadFrameOf(fd), &refusal, &server_key));
    CHECK(refusal.has_value());
    // One Resume per connection: a second one is cut off.
    Send(fd, real.frame);
    char byte;
    pollfd p{fd, POLLIN, 0};
    CHECK(::poll(&p, 1, 3000) == 1);
    CHECK(::recv(fd, &byte, 1, 0) <= 0);
    ::close(fd);
  }
  CHECK(Refused(b.server().door(), ResumeRefusal::kReplayed) == 1);
  CHECK(Refused(c.server().door(), ResumeRefusal::kWrongPeer) == 1);
  CHECK(b.server().door().resumed == 1);
  CHECK(c.server().door().resumed == 0);
  CHECK(b.server().door().authenticated == 1);
}

}  // namespace
}  // namespace tierfs
