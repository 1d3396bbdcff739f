// PeerClient when peers fail: a stalled server times out within the
// deadline and is skipped while slow, never taken for dead, then asked
// again; a server that stops mid-transfer leaves no byte written after
// Fetch returns, which returns at its deadline; a server that breaks the
// protocol or cannot prove itself is cut off; forged or replayed answers
// fail their fetch alone; a node that starts late becomes usable.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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
const ChunkRef kRef = Ref("f", 3 * kChunk, 1, kChunk);

std::chrono::milliseconds Since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

// A raw server posing as node "b" behind a real door, and node "a", a
// client of it only, connected.
struct FakeServer {
  FakeServer() : port(raw.Serve("b")), unused(kChunk), a("a", &unused, kChunk) {
    a.StartClient({{"b", "127.0.0.1", port}});
    REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  }
  RawPeer raw;
  uint16_t port;
  PatternProvider unused;
  TestNode a;
};

// The requests the raw server received (not the client's pings).
std::vector<RawPeer::Received> Requests(RawPeer& raw) {
  std::vector<RawPeer::Received> requests;
  for (const auto& r : raw.received()) {
    if (r.m.type == MsgType::kRequest) requests.push_back(r);
  }
  return requests;
}

// The request id of request number `count` the raw server received.
uint64_t AwaitRequest(RawPeer& raw, size_t count) {
  REQUIRE(Within(5s, [&] { return Requests(raw).size() >= count; }));
  return Requests(raw)[count - 1].m.request_id;
}

// A server's door played by hand on a port of its own: greets, checks the
// client's hello as "b" would, and answers with a claim `tweak` spoils.
class FakeDoor {
 public:
  explicit FakeDoor(void (*tweak)(PeerClaim*)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 4) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, tweak] { Serve(tweak); });
  }
  ~FakeDoor() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  std::atomic<int> answered{0};

 private:
  void Serve(void (*tweak)(PeerClaim*)) {
    int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    PeerNonce greeting = RandomNonce();
    std::string g = Framed(EncodeGreeting(greeting));
    ::send(c, g.data(), g.size(), MSG_NOSIGNAL);
    FrameReader reader;
    std::string_view cred;
    while (reader.Feed(c) == FrameReader::kMore) std::this_thread::sleep_for(1ms);
    PeerAuth b(Identity("b"), MungeDaemon::Get()->socket());
    AuthCheck check;
    if (DecodeHelloFrame(reader.frame(), &cred) &&
        (check = b.Check(cred, PeerClaim::kHello)).ok()) {
      const PeerClaim& hello = check.claim;
      PeerKeyPair keys;
      NewPeerKeyPair(&keys);
      PeerClaim answer{PeerClaim::kAnswer, RandomNonce(), hello.nonce, keys.pub, kJob, "b", "a"};
      tweak(&answer);
      PeerAuth maker(Identity("b", answer.job), MungeDaemon::Get()->socket());
      if (Result<std::string> out = maker.Make(answer); out.ok()) {
        std::string f = Framed(EncodeAnswerFrame(0, *out));
        ::send(c, f.data(), f.size(), MSG_NOSIGNAL);
        answered++;
      }
    }
    char byte;
    ::recv(c, &byte, 1, 0);  // until the client gives up
    ::close(c);
  }
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

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

TEST_CASE("peer client: a server stopping mid-transfer writes nothing after Fetch returns",
          "[peer]") {
  if (!PeersCanRun()) return;
  FakeServer fake;
  RawPeer& raw = fake.raw;
  PeerClient& a = fake.a.client();

  std::vector<char> buf(kChunk, 0x55);
  auto start = Clock::now();
  auto fetch =
      std::async(std::launch::async, [&] { return a.Fetch(0, kRef, buf.data(), start + 500ms); });
  uint64_t id = AwaitRequest(raw, 1);
  raw.Accept();
  WireHeader h;
  size_t n = EncodeData(raw.Next(id), kChunk, &h);
  std::string body(kChunk, 'x');
  REQUIRE(SealWire(raw.session().keys.send, &h, n, body.data(), body.size(), body.data()));
  raw.SendThenPause(h, n, body, UCP_AM_SEND_FLAG_RNDV, 2500ms);
  CHECK(fetch.get() == -ETIMEDOUT);
  CHECK(Since(start) < 500ms + 200ms);  // at its deadline, not when the transfer ends
  std::vector<char> after = buf;
  std::this_thread::sleep_for(3s);  // the raw server resumes meanwhile
  CHECK(std::memcmp(after.data(), buf.data(), kChunk) == 0);
  CHECK(std::count(buf.begin(), buf.end(), 0x55) == static_cast<ptrdiff_t>(kChunk));
  CHECK(a.counters(0).timeouts == 1);
  CHECK(a.counters(0).downs == 0);  // slow, not gone
}

TEST_CASE("peer client: answers that break the protocol cut the server off", "[peer]") {
  if (!PeersCanRun()) return;
  FakeServer fake;
  RawPeer& raw = fake.raw;
  PeerClient& a = fake.a.client();
  std::vector<char> buf(kChunk);
  auto fetch = std::async(std::launch::async,
                          [&] { return a.Fetch(0, kRef, buf.data(), Clock::now() + 5s); });
  uint64_t id = AwaitRequest(raw, 1);
  raw.Accept();
  WireHeader h;
  size_t n = EncodeData(raw.Next(id), 100, &h);  // not the chunk's length
  raw.SendSealed(h, n, std::string(100, 'x'));
  CHECK(fetch.get() == -EPROTO);
  CHECK(a.counters(0).garbage == 1);
  CHECK_FALSE(a.up(0));
}

TEST_CASE("peer client: a forged or replayed answer never reaches the reader", "[peer]") {
  if (!PeersCanRun()) return;
  FakeServer fake;
  RawPeer& raw = fake.raw;
  PeerClient& a = fake.a.client();
  std::vector<char> buf(kChunk, 0x55);
  auto fetch = [&] {
    return std::async(std::launch::async,
                      [&] { return a.Fetch(0, kRef, buf.data(), Clock::now() + 5s); });
  };
  std::string chunk(kChunk, '\0');
  FillPattern("f", kChunk, chunk.data(), kChunk);

  SECTION("bytes altered on the way") {
    auto f = fetch();
    uint64_t id = AwaitRequest(raw, 1);
    raw.Accept();
    WireHeader h;
    size_t n = EncodeData(raw.Next(id), kChunk, &h);
    std::string body = chunk;
    REQUIRE(SealWire(raw.session().keys.send, &h, n, body.data(), body.size(), body.data()));
    body[kChunk / 2] ^= 0x04;
    raw.Send(h, n, body, UCP_AM_SEND_FLAG_RNDV);
    CHECK(f.get() == -EBADMSG);
    CHECK(a.counters(0).forged == 1);
    // Anyone can forge that: the fetch fails, the connection stays.
    std::this_thread::sleep_for(100ms);
    CHECK(a.up(0));
    CHECK(a.counters(0).downs == 0);
  }
  SECTION("an answer sealed under another key") {
    auto f = fetch();
    uint64_t id = AwaitRequest(raw, 1);
    raw.Accept();
    WireHeader h;
    size_t n = EncodeData(raw.Next(id), kChunk, &h);
    PeerKey wrong{};
    raw.SendSealed(h, n, chunk, &wrong);
    CHECK(f.get() == -EBADMSG);
    CHECK(a.counters(0).forged == 1);
  }
  SECTION("a sequence number played twice") {
    auto f = fetch();
    uint64_t id = AwaitRequest(raw, 1);
    raw.Accept();
    WireHeader h;
    size_t n = EncodeData(WireIds{id, raw.session().session, 7}, kChunk, &h);
    raw.SendSealed(h, n, chunk);
    REQUIRE(f.get() == static_cast<ssize_t>(kChunk));
    CHECK(std::memcmp(buf.data(), chunk.data(), kChunk) == 0);
    auto again = std::async(std::launch::async,
                            [&] { return a.Fetch(0, kRef, buf.data(), Clock::now() + 700ms); });
    id = AwaitRequest(raw, 2);
    n = EncodeError(WireIds{id, raw.session().session, 7}, WireError::kStale, &h);
    raw.SendSealed(h, n, "");
    CHECK(again.get() == -ETIMEDOUT);  // the replay was ignored: no answer came
    CHECK(a.counters(0).replayed == 1);
    CHECK(a.up(0));
    CHECK(a.counters(0).downs == 0);
  }
  SECTION("answers to no request that do not authenticate: ignored") {
    raw.Accept();  // the client's first message, its ping, took the session
    WireHeader h;
    size_t n = EncodeError(raw.Next(999), WireError::kDenied, &h);
    raw.Send(h, n, "");  // no tag
    PeerKey wrong{};
    n = EncodeError(raw.Next(998), WireError::kUnknownSession, &h);
    raw.SendSealed(h, n, "", &wrong);
    n = EncodeBare(MsgType::kPing, raw.Next(997), &h);  // a server never pings: but unsealed
    raw.Send(h, n, "");
    CHECK(Within(5s, [&] { return a.counters(0).forged == 3; }));
    CHECK(a.up(0));
    CHECK(a.counters(0).downs == 0);
    CHECK(a.counters(0).resets == 0);
  }
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
    FakeDoor door(tweak);
    PatternProvider unused(kChunk);
    TestNode a("a", &unused, kChunk);
    a.StartClient({{"b", "127.0.0.1", door.port()}});
    CHECK(Within(5s, [&] { return a.client().counters(0).refused >= 1; }));
    // The door counts its answer after sending it: the client may refuse it first.
    CHECK(Within(5s, [&] { return door.answered == 1; }));
    CHECK_FALSE(a.client().up(0));
    CHECK(a.client().counters(0).ups == 0);
  }
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
