// PeerServer against hostile connections: garbage, requests before a
// hello, forged and replayed hellos, silence. Each is refused or cut off
// and counted, and the server keeps serving an honest peer meanwhile.
#include <catch2/catch.hpp>

#include "peer_fixture.h"
#include "raw_peer.h"

namespace tierfs {
namespace {

using namespace testing;

constexpr uint64_t kChunk = 1 << 20;

// Server "b" and an honest client "a" of it.
struct Setup {
  Setup() : provider(kChunk) {
    provider.Add("f", 3 * kChunk);
    PeerServerOptions options;
    options.hello_timeout = 400ms;
    b = std::make_unique<TestNode>("b", &provider, kChunk, 0, options);
    b->StartServer();
    a = std::make_unique<TestNode>("a", &provider, kChunk);
    a->StartClient({b->address()});
    REQUIRE(Within(5s, [&] { return a->client().up(0); }));
  }
  // The honest peer still gets its bytes.
  void HonestFetchWorks() {
    std::vector<char> buf(kChunk);
    ChunkRef ref{"f", 3 * kChunk, 1000, kChunk, 1};
    CHECK(a->client().Fetch(0, ref, buf.data(), std::chrono::steady_clock::now() + 5s) ==
          static_cast<ssize_t>(kChunk));
    CHECK(IsPattern("f", kChunk, buf.data(), kChunk));
  }
  const PeerServerCounters& counters() { return b->server().counters(); }

  PatternProvider provider;
  std::unique_ptr<TestNode> b, a;
};

// A hello for "b" from "a" of job kJob, made by this process.
std::string GoodHello(PeerAuth& as, const std::string& to = "b") {
  PeerClaim c{PeerClaim::kHello, RandomNonce(), {}, as.self().job, as.self().name, to};
  std::string cred, error;
  REQUIRE(as.Make(c, &cred, &error) == 0);
  return cred;
}

// The kind of the first message `raw` received, once it has one.
MsgType FirstReceived(RawPeer& raw, WireError* error) {
  REQUIRE(Within(5s, [&] { return !raw.received().empty(); }));
  auto r = raw.received().front();
  REQUIRE(r.status == WireStatus::kOk);
  *error = r.m.error;
  return r.m.type;
}

TEST_CASE("peer server: garbage is cut off and counted; others are still served", "[peer]") {
  if (!PeersCanRun()) return;
  Setup s;
  WireHeader h;
  size_t n = EncodeError(1, WireError::kIo, &h);
  WireHeader bad_magic = h, bad_version = h, bad_type = h;
  bad_magic[1] ^= 0x40;
  bad_version[4] = 9;
  bad_type[5] = 0;
  uint64_t expected = 0;
  for (const WireHeader* bad : {&bad_magic, &bad_version, &bad_type, &h}) {  // h: not a request
    RawPeer raw;
    raw.Connect(s.b->server().port());
    raw.Send(*bad, n, "");
    ++expected;
    CHECK(Within(5s, [&] { return s.counters().garbage == expected; }));
    CHECK(Within(5s, [&] { return raw.closed(); }));
  }
  CHECK(s.counters().bad_version == 1);
  {  // a large (rendezvous) body: refused without reading it
    RawPeer raw;
    raw.Connect(s.b->server().port());
    ChunkRef ref{"f", 3 * kChunk, 1000, kChunk, 0};
    n = EncodeRequest(2, ref, &h);
    raw.Send(h, n, std::string(256 << 10, 'x'), true, UCP_AM_SEND_FLAG_RNDV);
    CHECK(Within(5s, [&] { return s.counters().garbage == expected + 1; }));
    CHECK(Within(5s, [&] { return raw.closed(); }));
  }
  {  // authenticated, then an invalid chunk reference, then nothing more
    RawPeer raw;
    raw.Connect(s.b->server().port());
    PeerAuth as(Identity("x"), MungeDaemon::Get()->socket());
    n = EncodeHello(0, &h);
    raw.Send(h, n, GoodHello(as));
    WireError e;
    REQUIRE(FirstReceived(raw, &e) == MsgType::kHelloAnswer);
    REQUIRE(e == WireError::kOk);
    ChunkRef ref{"../f", 3 * kChunk, 1000, kChunk, 0};
    n = EncodeRequest(3, ref, &h);
    raw.Send(h, n, "../f");
    CHECK(Within(5s, [&] { return s.counters().garbage == expected + 2; }));
    CHECK(Within(5s, [&] { return raw.closed(); }));
  }
  {  // no reply endpoint: dropped unattributed; the silent connection times out
    RawPeer raw;
    raw.Connect(s.b->server().port());
    n = EncodeHello(0, &h);
    raw.Send(h, n, "MUNGE:x:", false);
    CHECK(Within(5s, [&] { return s.counters().stray == 1; }));
    CHECK(Within(5s, [&] { return s.counters().hello_timeouts == 1; }));
  }
  s.HonestFetchWorks();
  CHECK(s.a->client().up(0));
  CHECK(s.a->client().counters(0).downs == 0);
}

TEST_CASE("peer server: a request before the hello is refused and counted", "[peer]") {
  if (!PeersCanRun()) return;
  Setup s;
  RawPeer raw;
  raw.Connect(s.b->server().port());
  WireHeader h;
  ChunkRef ref{"f", 3 * kChunk, 1000, kChunk, 0};
  size_t n = EncodeRequest(9, ref, &h);
  raw.Send(h, n, "f");
  WireError e;
  CHECK(FirstReceived(raw, &e) == MsgType::kError);
  CHECK(e == WireError::kDenied);
  CHECK(raw.received().size() == 1);  // no data
  CHECK(Within(5s, [&] { return raw.closed(); }));
  CHECK(s.counters().unauthenticated == 1);
  CHECK(s.provider.calls == 0);
  s.HonestFetchWorks();
}

TEST_CASE("peer server: forged, misaddressed and replayed hellos are refused", "[peer]") {
  if (!PeersCanRun()) return;
  Setup s;
  PeerAuth x(Identity("x"), MungeDaemon::Get()->socket());
  PeerAuth other_job(Identity("x", "job-43"), MungeDaemon::Get()->socket());
  std::string replayed = GoodHello(x);
  std::string corrupted = GoodHello(x);
  corrupted[corrupted.size() / 2] ^= 0x01;
  struct Case {
    const char* what;
    std::string cred;
    AuthVerdict verdict;
  };
  std::vector<Case> cases = {
      {"a good hello", replayed, AuthVerdict::kOk},
      {"the same credential again", replayed, AuthVerdict::kReplayed},
      {"a corrupted credential", corrupted, AuthVerdict::kInvalid},
      {"not a credential", "hello, let me in", AuthVerdict::kInvalid},
      {"another job", GoodHello(other_job), AuthVerdict::kWrongJob},
      {"addressed to another node", GoodHello(x, "c"), AuthVerdict::kWrongPeer},
  };
  if (::geteuid() == 0) {
    PeerClaim claim{PeerClaim::kHello, RandomNonce(), {}, kJob, "x", "b"};
    cases.push_back({"made by another user", CredentialAs(65534, claim), AuthVerdict::kWrongUser});
  } else {
    WARN("not tried without root: a hello made by another user");
  }
  for (const Case& c : cases) {
    INFO(c.what);
    RawPeer raw;
    raw.Connect(s.b->server().port());
    WireHeader h;
    size_t n = EncodeHello(0, &h);
    raw.Send(h, n, c.cred);
    WireError e;
    CHECK(FirstReceived(raw, &e) == MsgType::kHelloAnswer);
    if (c.verdict == AuthVerdict::kOk) {
      CHECK(e == WireError::kOk);
      continue;
    }
    CHECK(e == WireError::kDenied);
    CHECK(Within(5s, [&] { return raw.closed(); }));
    CHECK(s.b->server().refused(c.verdict) >= 1);
  }
  CHECK(s.counters().hellos == 2);  // a's and the good one
  s.HonestFetchWorks();
}

TEST_CASE("peer server: raw bytes on the peer port do not stop it", "[peer]") {
  if (!PeersCanRun()) return;
  Setup s;
  // Below our messages: UCX's connection manager reads these. Whatever it
  // makes of them, the server goes on serving and nothing reaches it.
  for (size_t size : {1, 7, 4096, 65536}) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(s.b->server().port());
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    std::string junk(size, '\0');
    for (size_t i = 0; i < size; ++i) junk[i] = static_cast<char>(i * 131 + size);
    ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);  // it may reset us midway
    std::this_thread::sleep_for(50ms);
    ::close(fd);
  }
  s.HonestFetchWorks();
  CHECK(s.counters().hellos == 1);
  CHECK(s.counters().garbage == 0);
}

}  // namespace
}  // namespace tierfs
