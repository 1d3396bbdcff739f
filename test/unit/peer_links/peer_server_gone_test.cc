// A client that goes without a word (its process killed, its worker
// destroyed) while a server holds its session: UCX frees the server's reply
// endpoint to it when the connection fails, and a send on the pointer kept
// for it crashed the server (SIGSEGV in ucp_am_send_nbx): an answer read
// after the client went, or the kLeaving a stopping server says. The
// server's watch on each reply endpoint (UcxWorker::Watch) tells it first.
// Each case runs several times: the crash it guards against is a use of
// freed memory, which does not fault every time.
#include <catch2/catch.hpp>
#include <memory>
#include <thread>

#include "peer_fixture.h"
#include "raw_peer.h"

namespace tierfs {
namespace {

using namespace testing;

constexpr uint64_t kChunk = 1 << 20;
const ChunkRef kRef = Ref("f", 3 * kChunk, 1, kChunk);
constexpr int kRounds = 8;

// A client of `server`, as node "x", its handshake made.
std::unique_ptr<RawPeer> Client(TestNode& server, PeerAuth& x) {
  auto raw = std::make_unique<RawPeer>();
  REQUIRE(raw->Handshake(x, server.port()) == HandshakeResult::kOk);
  return raw;
}

TEST_CASE("peer server: an answer read after its client went is not sent to it", "[peer]") {
  if (!PeersCanRun()) return;
  PeerAuth x(Identity("x"), MungeDaemon::Get()->socket());
  for (int round = 0; round < kRounds; ++round) {
    INFO("round " << round);
    PatternProvider provider(kChunk);
    provider.Add("f", 3 * kChunk);
    TestNode b("b", &provider, kChunk);
    b.StartServer();
    provider.Stall();  // the read waits until the client is gone
    auto raw = Client(b, x);
    WireHeader h;
    size_t n = EncodeRequest(raw->Next(1), kRef, 5000, &h);
    raw->SendSealed(h, n, std::string(kRef.path));
    REQUIRE(Within(5s, [&] { return provider.calls.load() == 1; }));
    raw->Vanish();                       // gone without a word
    std::this_thread::sleep_for(300ms);  // the server's side of the connection fails
    provider.Release();                  // the answer is ready: nowhere to send it
    CHECK(Within(5s, [&] { return b.server().counters().replies_gone == 1; }));
    CHECK(Within(5s, [&] { return b.server().counters().bytes_in_flight == 0; }));
    CHECK(Within(5s, [&] { return b.server().counters().open == 0; }));
    CHECK(b.server().counters().served_chunks == 0);
    CHECK(b.server().counters().unwatched == 0);
  }
}

TEST_CASE("peer server: a stopping server does not tell a client that went it is leaving",
          "[peer]") {
  if (!PeersCanRun()) return;
  PeerAuth x(Identity("x"), MungeDaemon::Get()->socket());
  for (int round = 0; round < kRounds; ++round) {
    INFO("round " << round);
    PatternProvider provider(kChunk);
    provider.Add("f", 3 * kChunk);
    TestNode b("b", &provider, kChunk);
    b.StartServer();
    auto gone = Client(b, x);
    auto stays = Client(b, x);
    for (RawPeer* raw : {gone.get(), stays.get()}) {
      WireHeader h;
      size_t n = EncodeBare(MsgType::kPing, raw->Next(1), &h);
      raw->SendSealed(h, n, "");
      REQUIRE(Within(5s, [&] { return raw->received().size() == 1; }));  // its pong
    }
    gone->Vanish();  // heard from a moment ago, gone now
    // (Stopped at once, or once its connection failed: either way not sent to.)
    if (round % 2 == 0) std::this_thread::sleep_for(300ms);  // the connection fails there
    b.server().Stop();
    CHECK(b.server().counters().leaving_told >= 1);
    CHECK(Within(5s, [&] {
      for (const auto& r : stays->received()) {
        if (r.m.type == MsgType::kLeaving) return true;
      }
      return false;
    }));
  }
}

}  // namespace
}  // namespace tierfs
