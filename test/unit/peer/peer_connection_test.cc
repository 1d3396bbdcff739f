// One PeerConnection alone, against a table the test keeps (and the fake
// transport): every way down gives its table back what the connection held
// there, once: its endpoint (before the transport closes it, so that an
// error the close brings finds no connection), its session, and its place
// among the connections open; kBye's endpoint is let go at once and closed
// once the kBye is out; a connect that fails gives back its place alone.
#include "tiering/peers/client/peer_connection.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "fake_peer_transport.h"

namespace tierfs {
namespace {

using namespace std::chrono_literals;
using testing::FakePeerTransport;
using Clock = std::chrono::steady_clock;

// A table that records what its connection asks of it, in order, with the
// transport's closes among them.
class RecordingTable final : public ConnectionTable {
 public:
  RecordingTable() {
    transport_.on_close = [this](PeerEndpoint ep) { log.push_back("transport close " + Name(ep)); };
  }

  Clock::time_point Time() const override { return now; }
  PeerTransport* transport() const override { return &transport_; }
  bool stopped() const override { return false; }
  uint64_t NextRequestId() override { return ++request_id; }
  void Connect(PeerConnection&) override { log.push_back("connect"); }
  void Unlist(PeerEndpoint ep) override { log.push_back("unlist " + Name(ep)); }
  void UnlistSession(uint64_t session) override {
    log.push_back("unlist session " + std::to_string(session));
  }
  void Closed() override { log.push_back("one fewer open"); }

  static std::string Name(PeerEndpoint ep) {
    return std::to_string(reinterpret_cast<uintptr_t>(ep));
  }

  std::vector<std::string> log;
  Clock::time_point now = Clock::time_point(100h);
  uint64_t request_id = 0;
  mutable FakePeerTransport transport_;
};

PeerClientOptions Options() {
  PeerClientOptions o;
  o.peers = {PeerAddress{"b", "127.0.0.1", 1}};
  return o;
}

// `c` up on endpoint 5, session 7, as its table makes it.
void MakeUp(PeerConnection& c) {
  PeerLink& l = c.link();
  l.progress.ep = reinterpret_cast<PeerEndpoint>(uintptr_t{5});
  l.progress.crypto = std::make_shared<LinkCrypto>();
  l.progress.crypto->session = 7;
  l.status.state = LinkState::kUp;
}

const std::vector<std::string> kGivenBack = {"unlist 5", "transport close 5", "unlist session 7",
                                             "one fewer open"};

TEST_CASE("peer connection: every way down gives its table back what it held, once", "[peer]") {
  const PeerClientOptions options = Options();
  RecordingTable table;
  PeerConnection c(0, options, &table);

  SECTION("a failure") {
    MakeUp(c);
    c.Down("reset", /*dead=*/true);
    CHECK(table.log == kGivenBack);
  }
  SECTION("the peer leaving") {
    MakeUp(c);
    c.Leaving();
    CHECK(table.log == kGivenBack);
  }
  SECTION("the peer forgetting the session, nothing waiting") {
    MakeUp(c);
    c.Forgotten();
    CHECK(table.log == kGivenBack);  // and no connect: nobody waits
  }
  SECTION("the peer forgetting the session, a fetch waiting") {
    MakeUp(c);
    c.link().progress.pending[1] = std::make_shared<PeerRequest>();
    c.Forgotten();
    std::vector<std::string> want = kGivenBack;
    want.push_back("connect");
    CHECK(table.log == want);
  }
  SECTION("kBye, then down (as Shutdown does)") {
    MakeUp(c);
    c.Close();
    c.Down("shutting down", false);
    // Let go at once, closed once the kBye is out (the fake's sends end
    // at once); the way down after it has nothing left to give back.
    CHECK(table.log == kGivenBack);
    CHECK(table.transport_.Count(MsgType::kBye) == 1);
  }
  SECTION("a connect that fails: no endpoint nor session yet") {
    c.link().status.state = LinkState::kConnecting;
    c.Down("refused", false);
    CHECK(table.log == std::vector<std::string>{"one fewer open"});
  }
  SECTION("down again: nothing more to give") {
    MakeUp(c);
    c.Down("reset", true);
    c.Down("reset", true);
    CHECK(table.log == kGivenBack);
  }
}

}  // namespace
}  // namespace tierfs
