// The door's places and another user of a peer's node, who shares that
// node's address: a backlog it fills is taken a few connections at a turn,
// reading what they said before taking more, and the connections it holds
// open never take the places of connections from a port below 1024, which
// only the node's root daemon can open.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <thread>
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

TEST_CASE("peer door: another user holding its node's places does not keep the root daemon out",
          "[peer]") {
  if (!PeersCanRun()) return;
  if (::geteuid() != 0) {
    WARN("skipped: only root binds a port below 1024");
    return;
  }
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  // The attacker, another user on a's node (so from a's address, from
  // ports above 1023): 12 connections, each held 300 ms (never old enough
  // to be evicted) and dialled again at once when it ends or is turned
  // away. The door has 8 places for one address.
  std::atomic<bool> stop{false};
  std::vector<std::thread> squatters;
  for (int i = 0; i < 12; ++i) {
    squatters.emplace_back([&] {
      while (!stop.load()) {
        int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in to = Loopback(b.port());
        if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
          pollfd p{fd, POLLRDHUP, 0};
          ::poll(&p, 1, 300);  // held until it is closed or 300 ms
        }
        if (fd >= 0) ::close(fd);
      }
    });
  }
  REQUIRE(Within(5s, [&] { return b.server().door().turned_away > 0; }));  // the places are full

  TestNode a("a", &provider, kChunk);
  a.StartClient({b.address()});
  const bool up = Within(5s, [&] { return a.client().up(0); });
  const uint64_t turned = b.server().door().turned_away;
  stop = true;
  for (auto& t : squatters) t.join();
  INFO("turned away " << turned << "; from reserved ports " << b.server().door().reserved_port);
  CHECK(up);
  CHECK(b.server().door().reserved_port >= 1);
  if (up) {
    std::vector<char> buf(kChunk);
    CHECK(a.client().Fetch(0, Ref("f", 3 * kChunk, 1, kChunk), buf.data(), Clock::now() + 5s) ==
          static_cast<ssize_t>(kChunk));
    CHECK(IsPattern("f", kChunk, buf.data(), kChunk));
  }
}

}  // namespace
}  // namespace tierfs
