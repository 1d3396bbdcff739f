// PeerClient when peers fail: a stalled server times out within the
// deadline and is marked down, then up when it answers again; a server
// that stops mid-transfer leaves no byte written after Fetch returns; a
// server that answers garbage or cannot prove itself is cut off; a node
// that starts late becomes usable.
#include <catch2/catch.hpp>
#include <cstring>
#include <future>

#include "peer_fixture.h"
#include "raw_peer.h"

namespace tierfs {
namespace {

using namespace testing;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kChunk = 8 << 20;  // the default chunk: a rendezvous transfer
const ChunkRef kRef{"f", 3 * kChunk, 1000, kChunk, 1};

std::chrono::milliseconds Since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

// A raw server posing as node "b": answers client "a"'s hello with a claim
// `tweak` may spoil. Returns once the hello is answered.
void AnswerHello(RawPeer& raw, void (*tweak)(PeerClaim*) = nullptr) {
  REQUIRE(Within(5s, [&] { return !raw.received().empty(); }));
  RawPeer::Received hello = raw.received().front();
  REQUIRE(hello.m.type == MsgType::kHello);
  PeerAuth b(Identity("b"), MungeDaemon::Get()->socket());
  PeerClaim claim;
  std::string detail, cred, error;
  REQUIRE(b.Check(hello.body, PeerClaim::kHello, &claim, &detail) == AuthVerdict::kOk);
  PeerClaim answer{PeerClaim::kAnswer, RandomNonce(), claim.nonce, kJob, "b", "a"};
  if (tweak != nullptr) tweak(&answer);
  PeerAuth maker(Identity("b", answer.job), MungeDaemon::Get()->socket());
  REQUIRE(maker.Make(answer, &cred, &error) == 0);
  WireHeader h;
  size_t n = EncodeHelloAnswer(hello.m.request_id, WireError::kOk, &h);
  raw.Send(h, n, cred);
}

// A raw server posing as "b", and node "a", a client of it only, whose
// hello it has answered.
struct FakeServer {
  explicit FakeServer(void (*tweak)(PeerClaim*) = nullptr)
      : port(raw.Listen()), unused(kChunk), a("a", &unused, kChunk) {
    a.StartClient({{"b", "127.0.0.1", port}});
    AnswerHello(raw, tweak);
  }
  RawPeer raw;
  uint16_t port;
  PatternProvider unused;
  TestNode a;
};

// The request id of the latest request `raw` received.
uint64_t AwaitRequest(RawPeer& raw, size_t count) {
  REQUIRE(Within(5s, [&] { return raw.received().size() >= count; }));
  RawPeer::Received r = raw.received()[count - 1];
  REQUIRE(r.m.type == MsgType::kRequest);
  return r.m.request_id;
}

TEST_CASE("peer client: a stalled server times out, goes down, comes back", "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  TestNode a("a", &provider, kChunk);
  PeerClientOptions options;
  options.retry_min = 50ms;
  a.StartClient({b.address()}, options);
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  std::vector<char> buf(kChunk);

  provider.Stall();
  auto start = Clock::now();
  CHECK(a.client().Fetch(0, kRef, buf.data(), start + 300ms) == -ETIMEDOUT);
  CHECK(Since(start) < 300ms + 300ms);
  CHECK_FALSE(a.client().up(0));
  CHECK(a.client().counters(0).timeouts == 1);
  CHECK(a.client().counters(0).downs == 1);
  // Down: not asked, no wait.
  start = Clock::now();
  CHECK(a.client().Fetch(0, kRef, buf.data(), start + 5s) == -EHOSTDOWN);
  CHECK(Since(start) < 50ms);
  CHECK(a.client().counters(0).skipped >= 1);

  provider.Release();
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  CHECK(a.client().Fetch(0, kRef, buf.data(), Clock::now() + 5s) == static_cast<ssize_t>(kChunk));
  CHECK(IsPattern("f", kChunk, buf.data(), kChunk));
  CHECK(a.client().counters(0).ups == 2);
}

TEST_CASE("peer client: a server stopping mid-transfer writes nothing after Fetch returns",
          "[peer]") {
  if (!PeersCanRun()) return;
  FakeServer fake;
  RawPeer& raw = fake.raw;
  PeerClient& a = fake.a.client();
  REQUIRE(Within(5s, [&] { return a.up(0); }));

  std::vector<char> buf(kChunk, 0x55);
  auto start = Clock::now();
  auto fetch =
      std::async(std::launch::async, [&] { return a.Fetch(0, kRef, buf.data(), start + 500ms); });
  uint64_t id = AwaitRequest(raw, 2);
  WireHeader h;
  size_t n = EncodeData(id, kChunk, &h);
  raw.SendThenPause(h, n, std::string(kChunk, 'x'), UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_RNDV,
                    2500ms);
  CHECK(fetch.get() == -ETIMEDOUT);
  CHECK(Since(start) < 500ms + 500ms);
  std::vector<char> after = buf;
  std::this_thread::sleep_for(3s);  // the raw server resumes meanwhile
  CHECK(std::memcmp(after.data(), buf.data(), kChunk) == 0);
  CHECK_FALSE(a.up(0));
}

TEST_CASE("peer client: answers that break the protocol cut the server off", "[peer]") {
  if (!PeersCanRun()) return;
  FakeServer fake;
  RawPeer& raw = fake.raw;
  PeerClient& a = fake.a.client();
  REQUIRE(Within(5s, [&] { return a.up(0); }));
  std::vector<char> buf(kChunk);
  auto fetch = std::async(std::launch::async,
                          [&] { return a.Fetch(0, kRef, buf.data(), Clock::now() + 5s); });
  uint64_t id = AwaitRequest(raw, 2);
  WireHeader h;
  size_t n = EncodeData(id, 100, &h);  // not the chunk's length
  raw.Send(h, n, std::string(100, 'x'));
  CHECK(fetch.get() == -EPROTO);
  CHECK(a.counters(0).garbage == 1);
  CHECK_FALSE(a.up(0));
}

TEST_CASE("peer client: a server that cannot prove itself is not used", "[peer]") {
  if (!PeersCanRun()) return;
  void (*tweaks[])(PeerClaim*) = {
      [](PeerClaim* c) { c->echo = RandomNonce(); },  // does not answer our hello
      [](PeerClaim* c) { c->from = "c"; },            // another node
      [](PeerClaim* c) { c->job = "job-43"; },        // another job
      [](PeerClaim* c) { c->to = "z"; },              // to another node
  };
  for (auto tweak : tweaks) {
    FakeServer fake(tweak);
    PeerClient& a = fake.a.client();
    CHECK(Within(5s, [&] { return a.counters(0).refused == 1; }));
    CHECK_FALSE(a.up(0));
    CHECK(a.counters(0).ups == 0);
  }
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
