// The door's places and another user of a peer's node, who shares that
// node's address: a backlog it fills is taken a few connections at a turn,
// reading what they said before taking more, the connections it holds
// open never take the places of connections from a port below 1024, which
// only the node's root daemon can open, and the hellos it floods (each
// with the work asked of it done, each a real MUNGE credential of its own
// uid) never take the root daemon's turns at munged.
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <thread>
#include <vector>

#include "peer_fixture.h"
#include "tiering/peers/secure/door_puzzle.h"
#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/transport/wire.h"

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

// Another user (uid 65534, in a child process) on the root daemon's node:
// hellos as fast as it can, each with a fresh credential of its own and the
// greeting's puzzle solved. Exits 5 if it could bind a port below 1024
// (then the test's premise is broken), else loops until killed.
[[noreturn]] void FloodAsAnotherUser(uint16_t port, pid_t parent) {
  if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // after setuid, which clears it
  if (::getppid() != parent) ::_exit(3);
  [[maybe_unused]] int niced = ::nice(10);  // its CPU stands for another node's
  int probe = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in low = Loopback(700);
  low.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(probe, reinterpret_cast<sockaddr*>(&low), sizeof low) == 0) ::_exit(5);
  ::close(probe);
  // Its credentials made for root to decode (the door's uid), as an
  // attacker would: each costs the door a check.
  PeerAuth mallory(PeerIdentity{kJob, "a", 0, 0}, MungeDaemon::Get()->socket());
  for (;;) {
    const auto deadline = Clock::now() + 2s;
    Result<int> fd = ConnectTcp("127.0.0.1", port, deadline);
    if (!fd.ok()) {
      ::usleep(10000);
      continue;
    }
    FrameReader reader;
    PeerNonce nonce;
    unsigned bits = 0;
    uint64_t solution = 0;
    pollfd p{*fd, POLLIN, 0};
    FrameReader::Result got = FrameReader::kMore;
    while (got == FrameReader::kMore && ::poll(&p, 1, 1000) == 1) got = reader.Feed(*fd);
    PeerKeyPair keys;
    if (got == FrameReader::kDone && DecodeGreeting(reader.frame(), &nonce, &bits) &&
        SolvePuzzle(nonce, bits, deadline, &solution) && NewPeerKeyPair(&keys)) {
      PeerClaim c{PeerClaim::kHello, RandomNonce(), nonce, keys.pub, kJob, "a", "b"};
      Result<std::string> cred = mallory.Make(c);
      if (cred.ok()) {
        std::string f = Framed(EncodeHelloFrame(*cred, solution));
        ::send(*fd, f.data(), f.size(), MSG_NOSIGNAL);
        ::poll(&p, 1, 2000);  // until the door refuses it
      }
    }
    ::close(*fd);
  }
}

// The bits of work the door on `port` asks of a connection from `from`
// (99: no greeting: turned away).
unsigned GreetingBits(uint16_t port, SourcePort from) {
  const auto deadline = Clock::now() + 5s;
  Result<int> fd = ConnectTcp("127.0.0.1", port, deadline, from);
  REQUIRE(fd.ok());
  FrameReader reader;
  pollfd p{*fd, POLLIN, 0};
  FrameReader::Result got = FrameReader::kMore;
  while (got == FrameReader::kMore && ::poll(&p, 1, 5000) == 1) got = reader.Feed(*fd);
  PeerNonce nonce;
  unsigned bits = 99;
  if (got != FrameReader::kDone || !DecodeGreeting(reader.frame(), &nonce, &bits)) bits = 99;
  ::close(*fd);
  return bits;
}

TEST_CASE("peer door: solved hellos from another user do not take the root daemon's turns",
          "[peer][serial]") {
  if (!PeersCanRun()) return;
  if (::geteuid() != 0) {
    WARN("skipped: only root binds a port below 1024 and becomes another user");
    return;
  }
  const uint16_t port = FreePort();
  // The flooders, killed however the test ends.
  struct Flooders {
    std::vector<pid_t> pids;
    std::vector<int> Stop() {
      std::vector<int> statuses;
      for (pid_t pid : pids) ::kill(pid, SIGKILL);
      for (pid_t pid : pids) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        statuses.push_back(status);
      }
      pids.clear();
      return statuses;
    }
    ~Flooders() { Stop(); }
  } flooders;
  const pid_t parent = ::getpid();
  for (int i = 0; i < 12; ++i) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        FloodAsAnotherUser(port, parent);
      } catch (...) {
      }
      ::_exit(4);  // never back into the test runner
    }
    flooders.pids.push_back(pid);
  }
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk, port);
  b.StartServer();
  const PeerDoorCounters& door = b.server().door();
  // The flood is on: its hellos are checked, and refused as another user's.
  REQUIRE(
      Within(10s, [&] { return door.refused[static_cast<int>(AuthVerdict::kWrongUser)] > 20; }));
  // The work is the flooding source's: its node's root daemon, from a
  // reserved port, is asked for none; a daemon run as a user there shares
  // the flood's source: asked for its work, or turned away (99: no
  // greeting) while the flood holds the source's places.
  const unsigned root_bits = GreetingBits(port, SourcePort{700, 799});
  const unsigned user_bits = GreetingBits(port, SourcePort::kAny);
  TestNode a("a", &provider, kChunk);
  const auto asked = Clock::now();
  a.StartClient({b.address()});
  const bool up = Within(3s, [&] { return a.client().up(0); });
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - asked);
  const uint64_t wrong_user = door.refused[static_cast<int>(AuthVerdict::kWrongUser)];
  for (int status : flooders.Stop()) {
    CHECK_FALSE((WIFEXITED(status) && WEXITSTATUS(status) == 5));  // bound a reserved port
  }
  INFO("up after " << took.count() << " ms; the flood's hellos refused " << wrong_user
                   << "; checks " << door.checks << " (" << door.reserved_checks
                   << " from reserved ports); busy " << door.busy << "; work asked "
                   << door.work_asked << " (most " << door.work_bits << " bits); asked of a root "
                   << "daemon " << root_bits << " bits, of a user's " << user_bits);
  CHECK(up);
  CHECK(root_bits == 0);
  CHECK(user_bits >= 8);
  CHECK(door.reserved_checks >= 1);
  CHECK(door.busy == 0);
  CHECK(wrong_user > 20);
}

}  // namespace
}  // namespace tierfs
