// PeerClient against servers played by the test (RawPeer behind a real
// door, or a door played by hand): a server that stops mid-transfer leaves
// no byte written after Fetch returns, which returns at its deadline; a
// server that breaks the protocol or cannot prove itself is cut off; forged
// or replayed answers fail their fetch alone, and a forged or replayed
// "leaving" ends nothing. Slow, stalled, dead and late
// servers are in peer_client_failure_test.cc; the chunk both fetch and
// Since in peer_client_failure_fixture.h.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "munge_daemon.h"
#include "peer_client_failure_fixture.h"
#include "peer_fixture.h"
#include "raw_peer.h"
#include "tiering/peers/secure/peer_handshake.h"

namespace tierfs {
namespace {

using namespace testing;

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

TEST_CASE(
    "peer client: a forged or replayed \"leaving\" is ignored, the server's own ends the link",
    "[peer]") {
  if (!PeersCanRun()) return;
  FakeServer fake;
  RawPeer& raw = fake.raw;
  PeerClient& a = fake.a.client();
  raw.Accept();
  WireHeader h;
  // Forged: unsealed, and sealed under another key.
  size_t n = EncodeBare(MsgType::kLeaving, raw.Next(0), &h);
  raw.Send(h, n, "");
  PeerKey wrong{};
  n = EncodeBare(MsgType::kLeaving, raw.Next(0), &h);
  raw.SendSealed(h, n, "", &wrong);
  CHECK(Within(5s, [&] { return a.counters(0).forged == 2; }));
  // Replayed: the sequence number of an answer the client took already.
  const uint64_t seq = raw.Next(0).seq;
  n = EncodeBare(MsgType::kPong, WireIds{0, raw.session().session, seq}, &h);
  raw.SendSealed(h, n, "");
  n = EncodeBare(MsgType::kLeaving, WireIds{0, raw.session().session, seq}, &h);
  raw.SendSealed(h, n, "");
  CHECK(Within(5s, [&] { return a.counters(0).replayed == 1; }));
  CHECK(a.up(0));
  CHECK(a.counters(0).left == 0);
  CHECK_FALSE(a.dead(0));
  // Its own: down, taken for gone, counted as left, not as a failure.
  n = EncodeBare(MsgType::kLeaving, raw.Next(0), &h);
  raw.SendSealed(h, n, "");
  CHECK(Within(5s, [&] { return a.counters(0).left == 1; }));
  CHECK_FALSE(a.up(0));
  CHECK(a.dead(0));
  CHECK(a.counters(0).downs == 0);
  CHECK(a.counters(0).garbage == 0);
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

}  // namespace
}  // namespace tierfs
