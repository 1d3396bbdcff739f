// A server's Stop and the peers that may still be connecting to it: a
// session its door handed out lately, with no message on it yet, may have
// its peer wiring up an endpoint to this worker, so Stop keeps progressing
// for it, within Stop's limit (1 s); a session handed out longer ago than
// the window (2 s) was given up by its peer and holds nothing. A server
// that stops tells its clients it is leaving: they drop the link without
// a transport error (no "down"), and take it for gone.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "peer_fixture.h"
#include "tiering/peers/secure/peer_handshake.h"

namespace tierfs {
namespace {

using namespace testing;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kChunk = 1 << 16;

std::chrono::milliseconds StopTime(TestNode& node) {
  auto start = Clock::now();
  node.server().Stop();
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

TEST_CASE("peer server: an unused session holds Stop within its limit, and not past the window",
          "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  PeerServerOptions options;
  options.session_ttl = 30s;  // the session outlives the window: only the window lets it go
  TestNode b("b", &provider, kChunk, 0, options);
  b.StartServer();
  PeerAuth a(Identity("a"), MungeDaemon::Get()->socket());
  // The door's handshake as node "a", nothing after it: a session handed
  // out and never used (no endpoint, no message).
  DoorHandshake(a, b.port());
  REQUIRE(b.server().door().authenticated == 1);
  SECTION("handed out a moment ago: Stop waits for it, up to its limit") {
    auto took = StopTime(b);
    CHECK(took >= 900ms);
    CHECK(took < 3s);  // bounded: the limit, then the closes
  }
  SECTION("handed out longer ago than the window: Stop does not wait") {
    std::this_thread::sleep_for(2500ms);
    CHECK(StopTime(b) < 500ms);
  }
}

TEST_CASE("peer server: a server that stops tells its clients it is leaving", "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  TestNode a("a", &provider, kChunk);
  a.StartClient({b.address()});
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  std::vector<char> buf(kChunk);
  const ChunkRef ref = Ref("f", 3 * kChunk, 1, kChunk);
  REQUIRE(a.client().Fetch(0, ref, buf.data(), Clock::now() + 5s) == static_cast<ssize_t>(kChunk));
  b.server().Stop();
  CHECK(b.server().counters().leaving_told == 1);
  CHECK(Within(5s, [&] { return a.client().counters(0).left == 1; }));
  CHECK_FALSE(a.client().up(0));
  CHECK(a.client().dead(0));
  std::this_thread::sleep_for(200ms);  // a transport error, if any, would come now
  CHECK(a.client().counters(0).downs == 0);
}

}  // namespace
}  // namespace tierfs
