// A session's life at both ends, under a job's timing: pauses longer than
// every timer of the door, the server and the client leave the session
// usable; a session the server dropped is told to its client, which
// connects again in one round trip; connections are made on first need,
// closed by agreement when unused, and bounded in number. Every timer is
// shortened here and outlived.
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "peer_fixture.h"

namespace tierfs {
namespace {

using namespace testing;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kChunk = 1 << 20;
const ChunkRef kRef = Ref("f", 3 * kChunk, 1, kChunk);

std::chrono::milliseconds Since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

// One server node "b" (with `server`'s timers) and a client node "a" of it.
struct Pair {
  explicit Pair(PeerServerOptions server, PeerClientOptions client = {}, bool at_start = true)
      : provider(kChunk), b("b", &provider, kChunk, 0, server), a("a", &provider, kChunk) {
    provider.Add("f", 3 * kChunk);
    b.StartServer();
    a.connect_at_start = at_start;
    a.StartClient({b.address()}, client);
    if (at_start) REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  }
  ssize_t Fetch(std::chrono::milliseconds deadline = 5s) {
    buf.assign(kChunk, 0);
    return a.client().Fetch(0, kRef, buf.data(), Clock::now() + deadline);
  }
  PatternProvider provider;
  TestNode b, a;
  std::vector<char> buf;
};

TEST_CASE("peer session: a pause longer than the door's session_ttl before the first request",
          "[peer]") {
  if (!PeersCanRun()) return;
  PeerServerOptions server;
  server.session_ttl = 300ms;
  Pair p(server);
  std::this_thread::sleep_for(1200ms);  // four times the ttl: the job is still importing torch
  auto start = Clock::now();
  CHECK(p.Fetch(2s) == static_cast<ssize_t>(kChunk));
  CHECK(Since(start) < 1s);
  CHECK(IsPattern("f", kChunk, p.buf.data(), kChunk));
  CHECK(p.b.server().door().expired_sessions == 0);
  CHECK(p.b.server().counters().stray == 0);
  CHECK(p.a.client().counters(0).timeouts == 0);
  CHECK(p.a.client().counters(0).downs == 0);
}

TEST_CASE("peer session: a pause longer than the server's idle timeout between epochs", "[peer]") {
  if (!PeersCanRun()) return;
  PeerServerOptions server;
  server.idle_timeout = 400ms;
  PeerClientOptions client;
  client.dead_after = 400ms;  // pings every 100 ms
  Pair p(server, client);
  CHECK(p.Fetch() == static_cast<ssize_t>(kChunk));
  std::this_thread::sleep_for(2s);  // validation
  auto start = Clock::now();
  CHECK(p.Fetch(2s) == static_cast<ssize_t>(kChunk));
  CHECK(Since(start) < 1s);
  CHECK(p.b.server().counters().idle_dropped == 0);
  CHECK(p.b.server().counters().pings >= 5);
  CHECK(p.a.client().counters(0).downs == 0);
  CHECK(p.a.client().counters(0).ups == 1);
}

TEST_CASE("peer session: a session the server forgot costs its client one round trip", "[peer]") {
  if (!PeersCanRun()) return;
  PeerServerOptions server;
  server.idle_timeout = 500ms;  // shorter than the client's heartbeat (1 s): dropped between pings
  PeerClientOptions client;
  client.dead_after = 30s;
  client.retry_min = 20ms;
  Pair p(server, client);
  REQUIRE(Within(5s, [&] { return p.b.server().counters().idle_dropped >= 1; }));
  // The next message (a request, or the next ping) is told; the client connects again.
  auto start = Clock::now();
  CHECK(p.Fetch(5s) == static_cast<ssize_t>(kChunk));  // asked again on the new connection
  CHECK(Since(start) < 1s);                            // not the fetch's deadline
  CHECK(Within(3s, [&] { return p.a.client().counters(0).resets >= 1; }));
  CHECK(p.b.server().counters().forgotten_told >= 1);
  REQUIRE(Within(3s, [&] { return p.a.client().up(0); }));
  CHECK(p.Fetch(2s) == static_cast<ssize_t>(kChunk));
  CHECK_FALSE(p.a.client().dead(0));
  CHECK(p.a.client().counters(0).timeouts == 0);
}

TEST_CASE("peer session: connected on first need, closed by agreement when unused", "[peer]") {
  if (!PeersCanRun()) return;
  PeerClientOptions client;
  client.idle_close = 300ms;
  Pair p({}, client, /*at_start=*/false);
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(p.a.client().up(0));  // nobody asked yet
  CHECK(p.a.client().counters(0).ups == 0);
  CHECK(p.b.server().door().authenticated == 0);
  CHECK(p.Fetch() == static_cast<ssize_t>(kChunk));  // connects, then asks
  CHECK(p.a.client().counters(0).ups == 1);
  CHECK(p.a.client().open_connections() == 1);
  // Unused for longer than idle_close: closed at both ends, by a kBye.
  REQUIRE(Within(3s, [&] { return p.a.client().counters(0).closed_idle == 1; }));
  CHECK(Within(3s, [&] { return p.b.server().counters().byes == 1; }));
  CHECK(Within(3s, [&] { return p.b.server().counters().open == 0; }));
  CHECK(p.a.client().open_connections() == 0);
  CHECK_FALSE(p.a.client().dead(0));
  CHECK(p.Fetch() == static_cast<ssize_t>(kChunk));  // made again
  CHECK(p.a.client().counters(0).ups == 2);
  CHECK(p.a.client().counters(0).downs == 0);
}

TEST_CASE("peer session: a fetch longer than idle_close leaves its connection open after it",
          "[peer]") {
  if (!PeersCanRun()) return;
  PeerClientOptions client;
  client.idle_close = 300ms;
  Pair p({}, client);
  // b takes 600 ms to read the chunk (it answers pings meanwhile): the
  // link is busy, not idle, for twice idle_close.
  p.provider.Stall();
  auto fetch = std::async(std::launch::async, [&] { return p.Fetch(5s); });
  std::this_thread::sleep_for(600ms);
  p.provider.Release();
  REQUIRE(fetch.get() == static_cast<ssize_t>(kChunk));
  // Unused counts from the fetch's end: open for idle_close after it.
  std::this_thread::sleep_for(150ms);
  CHECK(p.a.client().counters(0).closed_idle == 0);
  CHECK(p.a.client().open_connections() == 1);
  REQUIRE(Within(3s, [&] { return p.a.client().counters(0).closed_idle == 1; }));
}

TEST_CASE("peer session: max_connections bounds the open connections", "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  std::vector<std::unique_ptr<TestNode>> servers;
  std::vector<PeerAddress> addresses;
  for (const char* name : {"b", "c", "d"}) {
    servers.push_back(std::make_unique<TestNode>(name, &provider, kChunk));
    servers.back()->StartServer();
    addresses.push_back(servers.back()->address());
  }
  TestNode a("a", &provider, kChunk);
  a.connect_at_start = false;
  PeerClientOptions client;
  client.max_connections = 2;
  a.StartClient(addresses, client);
  std::vector<char> buf(kChunk);
  for (int round = 0; round < 2; ++round) {
    for (size_t peer = 0; peer < 3; ++peer) {
      CHECK(a.client().Fetch(peer, kRef, buf.data(), Clock::now() + 5s) ==
            static_cast<ssize_t>(kChunk));
      CHECK(a.client().open_connections() <= 2);
    }
  }
  uint64_t closed = 0;
  for (size_t peer = 0; peer < 3; ++peer) closed += a.client().counters(peer).closed_idle;
  CHECK(closed >= 4);  // each new one closed the least recently used
  for (size_t peer = 0; peer < 3; ++peer) CHECK_FALSE(a.client().dead(peer));
}

TEST_CASE("peer session: a server full of sessions drops the least recently heard, and says so",
          "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  PeerServerOptions server;
  server.max_connections = 1;
  TestNode b("b", &provider, kChunk, 0, server);
  b.StartServer();
  TestNode a("a", &provider, kChunk), c("c", &provider, kChunk);
  PeerClientOptions client;
  client.retry_min = 20ms;
  a.connect_at_start = c.connect_at_start = false;
  a.StartClient({b.address()}, client);
  c.StartClient({b.address()}, client);
  std::vector<char> buf(kChunk);
  for (int round = 0; round < 3; ++round) {
    for (TestNode* n : {&a, &c}) {  // each connection makes room by dropping the other's
      auto start = Clock::now();
      CHECK(n->client().Fetch(0, kRef, buf.data(), start + 5s) == static_cast<ssize_t>(kChunk));
      CHECK(Since(start) < 2s);
    }
  }
  CHECK(b.server().counters().evicted_sessions >= 4);
  CHECK(b.server().counters().rejected_connections == 0);
  CHECK(a.client().counters(0).resets + c.client().counters(0).resets >= 4);
  CHECK_FALSE(a.client().dead(0));
  CHECK_FALSE(c.client().dead(0));
}

TEST_CASE("peer session: with every connection busy, a new one is put off, not waited for",
          "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider slow(kChunk), quick(kChunk);
  slow.Add("f", 3 * kChunk);
  quick.Add("f", 3 * kChunk);
  TestNode b("b", &slow, kChunk), c("c", &quick, kChunk);
  b.StartServer();
  c.StartServer();
  TestNode a("a", &quick, kChunk);
  a.connect_at_start = false;
  PeerClientOptions client;
  client.max_connections = 1;
  a.StartClient({b.address(), c.address()}, client);
  std::vector<char> one(kChunk), two(kChunk);
  REQUIRE(a.client().Fetch(0, kRef, one.data(), Clock::now() + 5s) == static_cast<ssize_t>(kChunk));
  slow.Stall();  // b's connection now has a request in flight: it cannot be closed
  auto busy = std::async(std::launch::async,
                         [&] { return a.client().Fetch(0, kRef, one.data(), Clock::now() + 5s); });
  REQUIRE(Within(2s, [&] { return slow.calls.load() >= 2; }));
  auto start = Clock::now();
  CHECK(a.client().Fetch(1, kRef, two.data(), start + 3s) == -EHOSTDOWN);
  CHECK(Since(start) < 1s);  // not the fetch's deadline
  std::this_thread::sleep_for(300ms);
  CHECK(a.client().counters(1).ups == 0);  // not retried unasked
  CHECK_FALSE(a.client().dead(1));
  CHECK(a.client().open_connections() == 1);
  slow.Release();
  CHECK(busy.get() == static_cast<ssize_t>(kChunk));
  CHECK(a.client().Fetch(1, kRef, two.data(), Clock::now() + 5s) ==
        static_cast<ssize_t>(kChunk));  // b's closes now, c's opens
  CHECK(a.client().counters(0).closed_idle == 1);
}

}  // namespace
}  // namespace tierfs
