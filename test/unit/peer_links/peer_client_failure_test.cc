// PeerClient when peers fail or are slow: a stalled server times out within
// the deadline and is skipped while slow, never taken for dead, then asked
// again; a server silent for dead_after is dead; one that answers nothing
// while a fetch waits has stalled, and one that answers pings while it
// reads slowly is waited for; fetches do not wait while a failed peer is
// connected again; a node that starts late becomes usable. Servers that
// break the protocol, forge answers or cannot prove themselves are in
// peer_client_hostile_test.cc; the chunk both fetch and Since in
// peer_client_failure_fixture.h.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "peer_client_failure_fixture.h"
#include "peer_fixture.h"
#include "raw_peer.h"

namespace tierfs {
namespace {

using namespace testing;

TEST_CASE("peer client: a stalled server is slow, not dead: skipped a while, then asked again",
          "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  TestNode a("a", &provider, kChunk);
  PeerClientOptions options;
  // Long enough to look at it while it is skipped.
  options.retry_min = 1500ms;
  options.retry_max = 1500ms;
  options.dead_after = 1s;  // its pings are answered: never dead
  a.StartClient({b.address()}, options);
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  std::vector<char> buf(kChunk);

  provider.stall_past_deadline = true;  // b answers nothing, not busy at the deadline
  provider.Stall();
  auto start = Clock::now();
  CHECK(a.client().Fetch(0, kRef, buf.data(), start + 300ms) == -ETIMEDOUT);
  CHECK(Since(start) < 300ms + 300ms);
  CHECK(a.client().counters(0).timeouts == 1);
  // Slow: not asked, no wait; but up, not dead (its chunks keep their home).
  std::this_thread::sleep_for(50ms);  // a progress round, however loaded the host
  start = Clock::now();
  CHECK(a.client().Fetch(0, kRef, buf.data(), start + 5s) == -EBUSY);
  CHECK(Since(start) < 50ms);
  CHECK(a.client().counters(0).skipped >= 1);
  CHECK(a.client().up(0));
  CHECK_FALSE(a.client().dead(0));

  provider.Release();
  std::this_thread::sleep_for(2s);  // past the slow spell and two dead_after
  CHECK(a.client().up(0));
  CHECK_FALSE(a.client().dead(0));
  CHECK(a.client().Fetch(0, kRef, buf.data(), Clock::now() + 5s) == static_cast<ssize_t>(kChunk));
  CHECK(IsPattern("f", kChunk, buf.data(), kChunk));
  CHECK(a.client().counters(0).ups == 1);
  CHECK(a.client().counters(0).downs == 0);
}

TEST_CASE("peer client: a server that stops answering anything is dead after dead_after",
          "[peer]") {
  if (!PeersCanRun()) return;
  RawPeer raw;  // takes the session, then never answers a ping
  uint16_t port = raw.Serve("b");
  PatternProvider unused(kChunk);
  TestNode a("a", &unused, kChunk);
  PeerClientOptions options;
  options.dead_after = 600ms;
  auto start = Clock::now();
  a.StartClient({{"b", "127.0.0.1", port}}, options);
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  raw.Accept();  // its first message, a ping, takes the session
  CHECK(raw.received().front().m.type == MsgType::kPing);
  CHECK(Within(5s, [&] { return a.client().dead(0); }));
  CHECK(Since(start) >= 600ms);
  CHECK(a.client().counters(0).downs == 1);
  // Pinged meanwhile (a heartbeat is a quarter of dead_after).
  size_t pings = 0;
  for (const auto& r : raw.received()) pings += r.m.type == MsgType::kPing;
  CHECK(pings >= 2);
}

TEST_CASE(
    "peer client: a server that answers nothing while a fetch waits has stalled: the fetch "
    "ends at once, not at its deadline",
    "[peer]") {
  if (!PeersCanRun()) return;
  RawPeer raw;  // takes the session, then answers nothing: a SIGSTOPped daemon
  uint16_t port = raw.Serve("b");
  PatternProvider unused(kChunk);
  TestNode a("a", &unused, kChunk);
  PeerClientOptions options;
  options.dead_after = 4s;  // a stall after 250 ms (no round trip measured), long before death
  options.retry_min = 2s;   // skipped that long after it
  options.retry_max = 2s;
  a.StartClient({{"b", "127.0.0.1", port}}, options);
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  raw.Accept();
  std::vector<char> buf(kChunk);
  auto start = Clock::now();
  CHECK(a.client().Fetch(0, kRef, buf.data(), start + 3s) == -ETIMEDOUT);
  CHECK(Since(start) < 1500ms);  // the deadline was 3 s
  CHECK(a.client().counters(0).stalls == 1);
  CHECK(a.client().counters(0).timeouts == 0);
  // Slow, not dead: skipped at once, its chunks keep their home.
  start = Clock::now();
  CHECK(a.client().Fetch(0, kRef, buf.data(), start + 3s) == -EBUSY);
  CHECK(Since(start) < 100ms);
  CHECK(a.client().up(0));
  CHECK_FALSE(a.client().dead(0));
  // Probed before it was taken for stalled.
  size_t pings = 0;
  for (const auto& r : raw.received()) pings += r.m.type == MsgType::kPing;
  CHECK(pings >= 2);  // the session's first message, and the probe
}

TEST_CASE("peer client: a server that answers pings while it reads a chunk slowly is waited for",
          "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  TestNode a("a", &provider, kChunk);
  PeerClientOptions options;
  options.dead_after = 1s;  // the stall time at most 250 ms: outlived four times over
  a.StartClient({b.address()}, options);
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  std::vector<char> buf(kChunk);
  provider.Stall();  // a home reading from a slow SOURCE: its progress thread still answers
  std::thread release([&] {
    std::this_thread::sleep_for(1s);
    provider.Release();
  });
  auto start = Clock::now();
  CHECK(a.client().Fetch(0, kRef, buf.data(), start + 5s) == static_cast<ssize_t>(kChunk));
  CHECK(Since(start) >= 1s);
  release.join();
  CHECK(IsPattern("f", kChunk, buf.data(), kChunk));
  CHECK(a.client().counters(0).stalls == 0);
  CHECK(a.client().counters(0).timeouts == 0);
  CHECK(b.server().counters().pings >= 2);  // the first message, and the probe
}

TEST_CASE("peer client: while a peer that failed is connected again, fetches do not wait for it",
          "[peer]") {
  if (!PeersCanRun()) return;
  // A listener that never accepts: the kernel completes the TCP handshake,
  // nobody greets, each attempt runs to connect_timeout (a node whose
  // daemon hangs, or whose SYNs go unanswered).
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  REQUIRE(::listen(fd, 64) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  PatternProvider unused(kChunk);
  TestNode a("a", &unused, kChunk);
  // Connected on first need: connected at start, a Fetch before the first
  // round of the progress thread finds it down and does not wait.
  a.connect_at_start = false;
  PeerClientOptions options;
  options.connect_timeout = 400ms;
  options.retry_min = 50ms;  // retried about every 450 ms, connecting for 400 of them
  options.retry_max = 50ms;
  a.StartClient({{"b", "127.0.0.1", ntohs(addr.sin_port)}}, options);
  std::vector<char> buf(kChunk);
  auto start = Clock::now();
  // The first need connects, and waits for it.
  CHECK(a.client().Fetch(0, kRef, buf.data(), start + 3s) == -EHOSTDOWN);
  CHECK(Since(start) >= 300ms);
  // Later ones, while it is retried, read SOURCE at once.
  auto worst = Clock::duration::zero();
  const auto until = Clock::now() + 1500ms;
  while (Clock::now() < until) {
    auto t = Clock::now();
    CHECK(a.client().Fetch(0, kRef, buf.data(), t + 3s) == -EHOSTDOWN);
    worst = std::max(worst, Clock::now() - t);
    std::this_thread::sleep_for(5ms);
  }
  CHECK(worst < 150ms);  // a retry's connect is 400 ms
  CHECK(a.client().counters(0).connect_failures >= 2);
  CHECK_FALSE(a.client().dead(0));  // within the grace
  ::close(fd);
}

TEST_CASE("peer client: a node that starts late becomes usable", "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  uint16_t port = FreePort();
  TestNode a("a", &provider, kChunk);
  a.StartClient({{"b", "127.0.0.1", port}});
  std::vector<char> buf(kChunk);
  CHECK(Within(5s, [&] { return a.client().counters(0).connect_failures >= 2; }));
  CHECK(a.client().Fetch(0, kRef, buf.data(), Clock::now() + 1s) == -EHOSTDOWN);

  TestNode b("b", &provider, kChunk, port);
  b.StartServer();
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  CHECK(a.client().Fetch(0, kRef, buf.data(), Clock::now() + 5s) == static_cast<ssize_t>(kChunk));
  CHECK(IsPattern("f", kChunk, buf.data(), kChunk));
}

}  // namespace
}  // namespace tierfs
