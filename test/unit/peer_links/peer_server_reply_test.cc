// PeerServer on a transport the test drives by hand (FakePeerTransport),
// after an honest handshake with its real door: the door names the
// transport's address; a message is answered on the endpoint it came by,
// which the server watches; once that watch ends (the client closed its
// endpoint, or went) nothing more is sent on it, the session is dropped at
// the next tick, and a later message of the session is told "unknown
// session" on the endpoint it came by; a client that refuses the watch is
// counted and not served.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "fake_peer_transport.h"
#include "munge_daemon.h"
#include "peer_fixture.h"
#include "tiering/peers/server/peer_server.h"

namespace tierfs {
namespace {

using namespace testing;

constexpr uint64_t kChunk = 1 << 20;

PeerEndpoint Endpoint(uintptr_t n) { return reinterpret_cast<PeerEndpoint>(n); }

// Server "b" on a fake transport, started (its door on a free port).
struct FakeServer {
  FakeServer() : provider(kChunk), auth(Identity("b"), MungeDaemon::Get()->socket()) {
    auto made_transport = std::make_unique<FakePeerTransport>();
    transport = made_transport.get();
    PeerServerOptions o;
    o.chunk_size = kChunk;
    auto made = PeerServer::Make(&auth, &provider, o, std::move(made_transport),
                                 [](std::chrono::milliseconds) {
                                   return Result<std::unique_ptr<PeerTransport>>(
                                       Status::Error(ENOTSUP, "no restart in this test"));
                                 });
    INFO(made.status().message());
    REQUIRE(made.ok());
    server = std::move(made).value();
    Status s = server->Start();
    INFO(s.message());
    REQUIRE(s.ok());
  }
  // A kPing of `session`, numbered `seq`, come by `reply`: what the server did with it.
  PeerTransport::Receipt Ping(const ClientSession& session, uint64_t seq, PeerEndpoint reply) {
    WireHeader h;
    size_t n = EncodeBare(MsgType::kPing, WireIds{seq, session.session, seq}, &h);
    REQUIRE(SealWire(session.keys.send, &h, n, nullptr, 0, nullptr));
    PeerTransport::Message m;
    m.header = h.data();
    m.header_size = n;
    m.reply = reply;
    return transport->Deliver(m);
  }
  // Messages sent on `ep` so far.
  size_t SentOn(PeerEndpoint ep) const {
    size_t count = 0;
    for (const auto& s : transport->sent) count += s.endpoint == ep;
    return count;
  }
  const PeerServerCounters& counters() const { return server->counters(); }

  PatternProvider provider;
  PeerAuth auth;
  FakePeerTransport* transport = nullptr;  // the server's
  std::unique_ptr<PeerServer> server;
};

TEST_CASE("peer server: answers on the endpoint a message came by, until its watch ends",
          "[peer]") {
  if (!PeersCanRun()) return;
  FakeServer b;
  PeerAuth x(Identity("x"), MungeDaemon::Get()->socket());
  const ClientSession session = DoorHandshake(x, b.server->port());
  CHECK(session.worker_address == "fake-worker");  // the door names the transport

  const PeerEndpoint first = Endpoint(1), second = Endpoint(2);
  CHECK(b.Ping(session, 2, first) == PeerTransport::Receipt::kDone);
  REQUIRE(b.transport->sent.size() == 1);
  CHECK(b.transport->sent[0].endpoint == first);
  CHECK(b.transport->sent[0].type == MsgType::kPong);
  CHECK(b.counters().connections == 1);
  REQUIRE(b.transport->watches.size() == 1);
  CHECK(b.transport->watches[0].endpoint == first);

  // Its client let go of the endpoint, or refused the watch (counted: a
  // client that holds no watch cannot be told from one that is gone).
  const bool refused = GENERATE(false, true);
  b.transport->watches[0].ended(refused, refused ? "Endpoint is not connected" : "Success");
  CHECK(b.counters().replies_gone == 1);
  CHECK(b.counters().unwatched == (refused ? 1 : 0));
  b.transport->Tick();  // dropped
  CHECK(b.counters().open == 0);
  // Its next message, by another endpoint: "unknown session" there, and
  // nothing on the endpoint whose watch ended.
  b.Ping(session, 3, second);
  CHECK(b.counters().forgotten_told == 1);
  REQUIRE(b.SentOn(second) == 1);
  CHECK(b.transport->sent.back().type == MsgType::kError);
  CHECK(b.SentOn(first) == 1);  // the kPong alone
  CHECK(b.counters().pings == 1);
}

TEST_CASE("peer server: a transport that refuses its handlers fails Make with its reason",
          "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  PeerAuth auth(Identity("b"), MungeDaemon::Get()->socket());
  auto transport = std::make_unique<FakePeerTransport>();
  transport->handlers_status = Status::Error(EBUSY, "the handler slot is taken");
  PeerServerOptions o;
  o.chunk_size = kChunk;
  // The server made so far is dropped: it stops with no transport attached.
  auto made =
      PeerServer::Make(&auth, &provider, o, std::move(transport), [](std::chrono::milliseconds) {
        return Result<std::unique_ptr<PeerTransport>>(
            Status::Error(ENOTSUP, "no restart in this test"));
      });
  REQUIRE_FALSE(made.ok());
  CHECK(made.status().code() == EBUSY);
  CHECK(made.status().message().find("handler slot") != std::string::npos);
}

}  // namespace
}  // namespace tierfs
