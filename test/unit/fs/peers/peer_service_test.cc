// PeerService, the one owner of the peers' start-up: it starts asking
// (JobPeers) and then answering (PeerServer), or neither, and stops both.
// No request comes in these tests: the service is given no snapshot and no
// read path.
#include "fs/peers/peer_service.h"

#include <catch2/catch.hpp>

#include "peer_fixture.h"

namespace tierfs {
namespace {

using namespace testing;

JobPeersConfig TwoNodes() {
  JobPeersConfig c;
  c.peers = {{"a", "127.0.0.1", 0}, {"b", "127.0.0.1", 1}};  // a: any free port
  c.self = "a";
  c.listen = "127.0.0.1";
  c.job = "job-7";
  c.munge_socket = MungeDaemon::Get()->socket();
  c.ucx_tls = TestUcx().tls;
  c.server_threads = 2;
  return c;
}

TEST_CASE("peer service: starts asking, then answering, and stops both", "[peer]") {
  if (!PeersCanRun()) return;
  JobPeers peers(TwoNodes(), nullptr);
  REQUIRE_FALSE(peers.started());  // built, not started: the service starts it
  auto service = PeerService::Start(&peers, nullptr, nullptr);
  INFO(service.status().message());
  REQUIRE(service.ok());
  CHECK(peers.started());
  CHECK((*service)->server().port() > 0);
  (*service)->Stop();
  CHECK_FALSE(peers.started());
}

TEST_CASE("peer service: a node its peer list leaves out neither asks nor serves", "[peer]") {
  if (!PeersCanRun()) return;
  JobPeersConfig config = TwoNodes();
  config.self = "c";
  JobPeers peers(config, nullptr);
  auto service = PeerService::Start(&peers, nullptr, nullptr);
  REQUIRE_FALSE(service.ok());
  CHECK_THAT(service.status().message(), Catch::Contains("not in the peer list"));
  CHECK_FALSE(peers.started());
}

TEST_CASE("peer service: a server that cannot start leaves this node asking nobody", "[peer]") {
  if (!PeersCanRun()) return;
  JobPeersConfig config = TwoNodes();
  config.listen = "not-an-address";  // asking starts; the door cannot bind it
  JobPeers peers(config, nullptr);
  auto service = PeerService::Start(&peers, nullptr, nullptr);
  REQUIRE_FALSE(service.ok());
  CHECK_THAT(service.status().message(), Catch::Contains("not an IPv4 address"));
  CHECK_FALSE(peers.started());  // not live to the others: not asking them either
}

}  // namespace
}  // namespace tierfs
