// The door and a backlog filled by another user of a peer's node: it takes
// a few connections at a turn and reads what they said before it takes
// more, so the flooder's connections, already answered, do not hold their
// address's places while a real peer from that address waits behind them.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <future>
#include <vector>

#include "peer_fixture.h"
#include "tiering/peer/peer_handshake.h"
#include "tiering/peer/wire.h"

namespace tierfs {
namespace {

using namespace testing;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kChunk = 1 << 16;

TEST_CASE("peer door: a real peer queued behind a flood from its own address is let in", "[peer]") {
  if (!PeersCanRun()) return;
  // The listening socket, made before the door runs (as systemd hands one
  // over), so the test can fill its backlog first.
  const uint16_t port = FreePort();
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in addr = Loopback(port);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener, 256) == 0);

  // The flooder: 40 connections from loopback, each of which has already
  // said its piece (a frame that is no hello) when the door takes it. The
  // door's places for one address are 8.
  std::vector<int> flood;
  for (int i = 0; i < 40; ++i) {
    int fd = DialLoopback(port);
    std::string junk = Framed("not a hello");
    REQUIRE(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(junk.size()));
    flood.push_back(fd);
  }
  // The real peer, from the same address, queued behind them.
  const auto deadline = Clock::now() + 5s;
  Result<int> mine = ConnectTcp("127.0.0.1", port, deadline);
  REQUIRE(mine.ok());
  PeerAuth a(Identity("a"), MungeDaemon::Get()->socket());
  auto handshake =
      std::async(std::launch::async, [&] { return RunClientHandshake(*mine, a, "b", deadline); });

  PatternProvider provider(kChunk);
  PeerServerOptions options;
  options.inherited_fd = listener;
  TestNode b("b", &provider, kChunk, port, options);
  b.StartServer();
  Result<ClientSession> made = handshake.get();
  ::close(*mine);
  for (int fd : flood) ::close(fd);
  INFO(made.status().message());
  INFO("turned away: " << b.server().door().turned_away
                       << ", garbage: " << b.server().door().garbage);
  CHECK(made.ok());
  CHECK(b.server().door().turned_away == 0);
  CHECK(b.server().door().garbage == 40);
}

}  // namespace
}  // namespace tierfs
