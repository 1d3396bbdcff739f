// PeerClient and a peer that goes silent while reads want it: one that
// answers nothing, not even a ping, for its silence bound (at least 1 s)
// after it stalled has its connection made afresh, resumed by its ticket
// (no MUNGE), its fetches ending at once, and is dead only after
// dead_after of silence however often its door lets it in again, then
// connected to as any lost peer is; one
// that answers pings but not fetches (a loaded host) is skipped while
// slow and never connected afresh.
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

// Fetches from peer 0 every 20 ms until `done` or `limit`, so that reads
// want it; each Fetch must return within `bound`. True if `done`.
template <typename F>
bool FetchUntil(TestNode& a, std::chrono::milliseconds limit, std::chrono::milliseconds bound,
                F done) {
  std::vector<char> buf(kChunk);
  const auto end = Clock::now() + limit * kSlowdown;
  while (!done() && Clock::now() < end) {
    const auto start = Clock::now();
    a.client().Fetch(0, kRef, buf.data(), start + 3s);
    if (kTimed) CHECK(Since(start) < bound);
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

TEST_CASE(
    "peer client: a stalled peer silent while reads want it is connected afresh by its ticket, "
    "and dead only after dead_after",
    "[peer]") {
  if (!PeersCanRun()) return;
  RawPeer raw;  // its door lets anyone in; its worker answers nothing, not even a ping
  uint16_t port = raw.Serve("b");
  PatternProvider unused(kChunk);
  TestNode a("a", &unused, kChunk);
  PeerClientOptions options;
  // The stall after 250 ms (no round trip measured); the silence bound
  // max(1 s, 2 x 250 ms) = 1 s, below dead_after / 2.
  options.dead_after = 5s;
  // The client counts b's silence from its last message, which comes
  // before `up` and the accept: the lower bounds count from before the
  // connection (they hold to the millisecond), the upper ones from after it.
  const auto before_up = Clock::now();
  a.StartClient({{"b", "127.0.0.1", port}}, options);
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  raw.Accept();
  const auto silent_from = Clock::now();
  const PeerLinkCounters& c = a.client().counters(0);

  // A fetch waits: stalled within the stall time, then skipped (-EBUSY),
  // which wants it; 1 s after its last answer its connection is dropped
  // and made again. No Fetch waits long for it meanwhile.
  REQUIRE(FetchUntil(a, 4s, 1500ms, [&] { return c.reconnects_after_silence >= 1; }));
  CHECK(Since(before_up) >= 1s);
  CHECK(c.stalls >= 1);
  CHECK_FALSE(a.client().dead(0));
  // Made again by its ticket, without MUNGE; not counted as a down.
  REQUIRE(FetchUntil(a, 3s, 1500ms, [&] { return c.ups >= 2; }));
  CHECK(c.resumed >= 1);
  CHECK(c.downs == 0);
  CHECK_FALSE(a.client().dead(0));

  // It never answers on the new connections either: its door's answers
  // are not its own, and dead_after decides death as before.
  REQUIRE(FetchUntil(a, 8s, 1500ms, [&] { return a.client().dead(0); }));
  CHECK(Since(before_up) >= options.dead_after);
  if (kTimed) CHECK(Since(silent_from) < options.dead_after + 3s);
  CHECK(c.downs >= 1);
  // Connected afresh at most once per silence bound and stall: no loop.
  CHECK(c.reconnects_after_silence <= 6);

  // Taken for gone, it is connected to again as any lost peer is, and
  // that connection is heard when made: it stays up (its first answer
  // could still come), not down again at once for the silence before.
  REQUIRE(FetchUntil(a, 8s, 1500ms, [&] { return a.client().up(0); }));
  std::this_thread::sleep_for(300ms);
  CHECK(a.client().up(0));
  CHECK_FALSE(a.client().dead(0));
}

TEST_CASE(
    "peer client: a peer that answers pings but not fetches is skipped while slow and never "
    "connected afresh",
    "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  TestNode a("a", &provider, kChunk);
  PeerClientOptions options;
  // The silence bound at its least: dead_after / 2 = 500 ms.
  options.dead_after = 1s;
  a.StartClient({b.address()}, options);
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  const PeerLinkCounters& c = a.client().counters(0);

  // A loaded host: its fetches go unanswered past their deadlines, its
  // progress thread answers pings. Its readers time out, skip it while
  // slow (so reads want it), ask it again: for six silence bounds.
  provider.stall_past_deadline = true;
  provider.Stall();
  std::vector<char> buf(kChunk);
  const auto end = Clock::now() + 3s;
  while (Clock::now() < end) {
    const auto start = Clock::now();
    ssize_t r = a.client().Fetch(0, kRef, buf.data(), start + 150ms);
    if (kTimed) {
      CHECK((r == -ETIMEDOUT || r == -EBUSY));
      CHECK(Since(start) < 500ms);
    }
    std::this_thread::sleep_for(20ms);
  }
  provider.Release();
  // Under ThreadSanitizer a ping's answer may take longer than the bound
  // itself: the code ran (for its races), its timing is not checked.
  if (!kTimed) return;
  CHECK(c.timeouts >= 2);
  CHECK(c.skipped >= 1);
  CHECK(c.reconnects_after_silence == 0);
  CHECK(c.stalls == 0);
  CHECK(c.ups == 1);
  CHECK(a.client().up(0));
  CHECK_FALSE(a.client().dead(0));
}

}  // namespace
}  // namespace tierfs
