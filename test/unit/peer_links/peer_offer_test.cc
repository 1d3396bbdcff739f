// A cold chunk between two peers: the asker asks its home for the bytes
// only if the home has them (kIfResident), reads SOURCE itself when it has
// not (kNotResident, answered at once, no provider read), and offers the
// home its copy (kOffer). Then the offers an attacker sends, each played by
// the test: altered after sealing, replayed, of another snapshot, on no
// session, over the byte budget, of a body that is not the chunk. None is
// kept, each is counted, and the honest peer goes on being served.
#include <catch2/catch.hpp>

#include "peer_fixture.h"
#include "raw_peer.h"

namespace tierfs {
namespace {

using namespace testing;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kChunk = 1 << 20;

struct Pair {
  explicit Pair(PeerServerOptions options = {}) : provider(kChunk) {
    provider.Add("f", 3 * kChunk);
    provider.Add("small", 1000);
    b = std::make_unique<TestNode>("b", &provider, kChunk, 0, options);
    b->StartServer();
    a = std::make_unique<TestNode>("a", &provider, kChunk);
    a->StartClient({b->address()});
    REQUIRE(Within(5s, [&] { return a->client().up(0); }));
    // A session is taken by its first request; an offer takes none (it
    // follows a kNotResident answer on its session).
    std::vector<char> buf(1000);
    REQUIRE(a->client().Fetch(0, Ref("small", 1000, 0, kChunk), buf.data(), Clock::now() + 5s) ==
            1000);
    provider.calls = 0;
  }
  const PeerServerCounters& counters() { return b->server().counters(); }

  PatternProvider provider;
  std::unique_ptr<TestNode> b, a;
};

std::vector<char> Pattern(std::string_view path, uint64_t off, size_t n) {
  std::vector<char> v(n);
  FillPattern(path, off, v.data(), n);
  return v;
}

TEST_CASE("peer offer: a home without the chunk says so at once, one with it serves it", "[peer]") {
  if (!PeersCanRun()) return;
  Pair p;
  std::vector<char> buf(kChunk, 'z');
  p.provider.holds = false;
  auto start = Clock::now();
  CHECK(p.a->client().Fetch(0, Ref("f", 3 * kChunk, 1, kChunk), buf.data(), start + 5s,
                            kIfResident) == -ENODATA);
  CHECK(p.provider.calls == 0);  // no read, no promotion at the home
  CHECK(p.counters().not_resident == 1);
  CHECK(p.a->client().counters(0).not_resident == 1);
  CHECK(p.a->client().counters(0).errors == 0);
  CHECK(buf[0] == 'z');
  CHECK(p.a->client().up(0));
  // Without the flag the home reads it (it is the home: a job reads each
  // chunk from SOURCE once) ...
  CHECK(p.a->client().Fetch(0, Ref("f", 3 * kChunk, 1, kChunk), buf.data(), Clock::now() + 5s) ==
        static_cast<ssize_t>(kChunk));
  CHECK(p.provider.calls == 1);
  // ... and with it, once it holds the chunk (or is promoting it).
  p.provider.holds = true;
  CHECK(p.a->client().Fetch(0, Ref("f", 3 * kChunk, 2, kChunk), buf.data(), Clock::now() + 5s,
                            kIfResident) == static_cast<ssize_t>(kChunk));
  CHECK(IsPattern("f", 2 * kChunk, buf.data(), kChunk));
  // A file the home does not know is still an error, not "read it yourself".
  CHECK(p.a->client().Fetch(0, Ref("nope", 3 * kChunk, 0, kChunk), buf.data(), Clock::now() + 5s,
                            kIfResident) == -ENOENT);
}

TEST_CASE("peer offer: the home keeps the chunk its peer read, small or large", "[peer]") {
  if (!PeersCanRun()) return;
  Pair p;
  std::vector<char> large = Pattern("f", kChunk, kChunk);  // a rendezvous transfer
  std::vector<char> small = Pattern("small", 0, 1000);     // an eager one
  CHECK(p.a->client().Offer(0, Ref("f", 3 * kChunk, 1, kChunk), large.data()));
  CHECK(p.a->client().Offer(0, Ref("small", 1000, 0, kChunk), small.data()));
  REQUIRE(Within(5s, [&] { return p.provider.adopted == 2; }));
  CHECK(p.provider.adopted_intact == 2);
  CHECK(Within(5s, [&] { return p.counters().adopted == 2; }));
  CHECK(p.counters().offers == 2);
  CHECK(p.a->client().counters(0).offered == 2);
  CHECK(Within(5s, [&] { return p.counters().bytes_in_flight == 0; }));
  CHECK(p.provider.calls == 0);  // an offer is never answered, nor read at the home
}

TEST_CASE("peer offer: the home adopts an offer on a pool thread, not its progress thread",
          "[peer]") {
  if (!PeersCanRun()) return;
  Pair p;
  // Holds() runs on the server's progress thread: it names that thread.
  std::vector<char> buf(kChunk);
  p.provider.holds = false;
  REQUIRE(p.a->client().Fetch(0, Ref("f", 3 * kChunk, 0, kChunk), buf.data(), Clock::now() + 5s,
                              kIfResident) == -ENODATA);
  const std::thread::id progress = p.provider.holds_thread();
  REQUIRE(progress != std::thread::id());
  std::vector<char> large = Pattern("f", kChunk, kChunk);  // a rendezvous body
  std::vector<char> small = Pattern("small", 0, 1000);     // an eager one
  CHECK(p.a->client().Offer(0, Ref("f", 3 * kChunk, 1, kChunk), large.data()));
  CHECK(p.a->client().Offer(0, Ref("small", 1000, 0, kChunk), small.data()));
  REQUIRE(Within(5s, [&] { return p.provider.adopted == 2; }));
  const std::set<std::thread::id> adopters = p.provider.adopt_threads();
  CHECK(adopters.count(progress) == 0);
  CHECK(adopters.count(std::this_thread::get_id()) == 0);
}

TEST_CASE("peer offer: an offer that does not hold is dropped and counted", "[peer]") {
  if (!PeersCanRun()) return;
  Pair p;
  PeerAuth x(Identity("x"), MungeDaemon::Get()->socket());
  const ChunkRef ref = Ref("f", 3 * kChunk, 1, kChunk);
  const std::string path(ref.path);
  auto body_of = [&](const ChunkRef& r) {
    std::vector<char> bytes = Pattern(r.path, r.offset(), r.chunk_length());
    return std::string(r.path) + std::string(bytes.begin(), bytes.end());
  };
  const ChunkRef small = Ref("small", 1000, 0, kChunk);
  // The attacker's handshake (it is of the job), and its first request,
  // which takes the session (an offer takes none) unless `take` is false.
  auto join = [&](RawPeer& raw, bool take = true) {
    REQUIRE(raw.Handshake(x, p.b->port()) == HandshakeResult::kOk);
    if (!take) return;
    WireHeader h;
    size_t n = EncodeRequest(raw.Next(1), ref, 5000, &h);
    raw.SendSealed(h, n, path);
    REQUIRE(Within(5s, [&] { return raw.received().size() == 1; }));
  };

  SECTION("bytes altered after sealing: not kept; the session stays (anyone can name it)") {
    RawPeer raw;
    join(raw);
    WireHeader h;
    size_t n = EncodeOffer(raw.Next(0), ref, &h);
    std::string body = body_of(ref);
    REQUIRE(SealWire(raw.session().keys.send, &h, n, body.data(), body.size(), nullptr));
    body[path.size() + kChunk / 2] ^= 0x01;  // one byte of the chunk, on the way
    raw.Send(h, n, body, UCP_AM_SEND_FLAG_RNDV);
    CHECK(Within(5s, [&] { return p.counters().forged == 1; }));
    CHECK(p.counters().open == 2);  // a's, and the raw peer's: not cut by a forgery
    CHECK(p.provider.adopted == 0);
  }
  SECTION("an offer played again is refused; the session stays") {
    RawPeer raw;
    join(raw);
    WireHeader h;
    size_t n = EncodeOffer(raw.Next(0), small, &h);
    std::string body = body_of(small);
    REQUIRE(SealWire(raw.session().keys.send, &h, n, body.data(), body.size(), nullptr));
    raw.Send(h, n, body);
    REQUIRE(Within(5s, [&] { return p.provider.adopted == 1; }));
    raw.Send(h, n, body);
    CHECK(Within(5s, [&] { return p.counters().replayed == 1; }));
    CHECK(p.provider.adopted == 1);
    CHECK(p.counters().open == 2);
  }
  SECTION("an offer of another snapshot of the file is not kept") {
    RawPeer raw;
    join(raw);
    ChunkRef other = Ref("small", 1000, 0, kChunk);
    other.mtime_ns += 1;  // the file as it was rewritten, same size
    WireHeader h;
    size_t n = EncodeOffer(raw.Next(0), other, &h);
    raw.SendSealed(h, n, body_of(other));
    CHECK(Within(5s, [&] { return p.counters().offers_refused == 1; }));
    CHECK(p.counters().offers == 1);
    CHECK(p.provider.adopted == 0);
  }
  SECTION("an offer may open its session, if the door can check it") {
    // After a reconnect an offer can be a session's first message: an
    // eager one takes the session (the door checks its tag) and is kept;
    // a forged one, or a rendezvous one (not checkable before it is
    // received), takes nothing.
    RawPeer forger;
    join(forger, /*take=*/false);
    WireHeader h;
    size_t n = EncodeOffer(forger.Next(0), small, &h);
    std::string body = body_of(small);
    REQUIRE(SealWire(forger.session().keys.send, &h, n, body.data(), body.size(), nullptr));
    body.back() ^= 1;
    forger.Send(h, n, body, UCP_AM_SEND_FLAG_EAGER);
    CHECK(Within(5s, [&] { return p.counters().stray == 1; }));
    RawPeer large;
    join(large, /*take=*/false);
    n = EncodeOffer(large.Next(0), ref, &h);
    std::string big = body_of(ref);
    REQUIRE(SealWire(large.session().keys.send, &h, n, big.data(), big.size(), nullptr));
    large.Send(h, n, big, UCP_AM_SEND_FLAG_RNDV);
    CHECK(Within(5s, [&] { return p.counters().stray == 2; }));
    RawPeer raw;
    join(raw, /*take=*/false);
    n = EncodeOffer(raw.Next(0), small, &h);
    raw.SendSealed(h, n, body_of(small));
    CHECK(Within(5s, [&] { return p.provider.adopted == 1; }));
    CHECK(p.counters().stray == 2);
    CHECK(p.counters().open == 2);  // a's, and the one the offer took
    // The session it took serves the requests that follow.
    n = EncodeRequest(raw.Next(1), ref, 5000, &h);
    raw.SendSealed(h, n, path);
    CHECK(Within(5s, [&] { return raw.received().size() == 1; }));
  }
  SECTION("a body that is not the whole chunk is garbage") {
    RawPeer raw;
    join(raw);
    WireHeader h;
    size_t n = EncodeOffer(raw.Next(0), small, &h);
    std::string body = body_of(small);
    body.pop_back();
    raw.SendSealed(h, n, body);
    CHECK(Within(5s, [&] { return p.counters().garbage == 1; }));
    CHECK(p.provider.adopted == 0);
  }
  CHECK(p.provider.adopted_intact == p.provider.adopted);
  // The honest peer is still served.
  std::vector<char> buf(kChunk);
  CHECK(p.a->client().Fetch(0, ref, buf.data(), Clock::now() + 5s) == static_cast<ssize_t>(kChunk));
  CHECK(IsPattern("f", kChunk, buf.data(), kChunk));
}

TEST_CASE("peer offer: an offer over the byte budget is dropped unread", "[peer]") {
  if (!PeersCanRun()) return;
  PeerServerOptions options;
  options.max_bytes_per_connection = kChunk / 2;
  Pair p(options);
  std::vector<char> large = Pattern("f", 0, kChunk);
  CHECK(p.a->client().Offer(0, Ref("f", 3 * kChunk, 0, kChunk), large.data()));
  CHECK(Within(5s, [&] { return p.counters().offers_refused == 1; }));
  CHECK(p.counters().peak_bytes_in_flight <=
        1000);  // the first request's: the offer was never received
  CHECK(p.provider.adopted == 0);
  // A small one fits, and is kept.
  std::vector<char> small = Pattern("small", 0, 1000);
  CHECK(p.a->client().Offer(0, Ref("small", 1000, 0, kChunk), small.data()));
  CHECK(Within(5s, [&] { return p.provider.adopted == 1; }));
}

TEST_CASE("peer offer: the asker's own budget for offers in flight", "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  TestNode a("a", &provider, kChunk);
  PeerClientOptions options;
  options.max_offer_bytes = kChunk;  // one chunk (and its path) does not fit
  a.StartClient({b.address()}, options);
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  std::vector<char> large = Pattern("f", 0, kChunk);
  CHECK_FALSE(a.client().Offer(0, Ref("f", 3 * kChunk, 0, kChunk), large.data()));
  CHECK(a.client().counters(0).offers_dropped == 1);
  CHECK(a.client().counters(0).offered == 0);
}

}  // namespace
}  // namespace tierfs
