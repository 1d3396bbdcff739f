// PeerNode: this node as its peers know it, made from the options once:
// its entry's port, the address it is told to listen on (or its entry's,
// resolved), and its MUNGE identity for the job; a node not in the list
// is an error, not a node.
#include "tiering/peers/secure/peer_node.h"

#include <unistd.h>

#include <catch2/catch.hpp>

namespace tierfs {
namespace {

JobPeersConfig TwoNodes() {
  JobPeersConfig c;
  c.peers = {{"n0", "127.0.0.1", 7100}, {"n1", "127.0.0.2", 7101}};
  c.self = "n1";
  c.job = "job-42";
  return c;
}

TEST_CASE("peer node: its entry's port and address, and its identity for the job", "[peer]") {
  JobPeersConfig c = TwoNodes();
  c.listen = "0.0.0.0";  // any address: UCX keeps to no interface
  auto node = PeerNode::Make(c);
  REQUIRE(node.ok());
  const PeerNode& n = **node;
  CHECK(n.listen_host == "0.0.0.0");
  CHECK(n.listen_port == 7101);
  CHECK(n.net_device.empty());
  REQUIRE(n.auth != nullptr);
  CHECK(n.auth->self().job == "job-42");
  CHECK(n.auth->self().name == "n1");
  CHECK(n.auth->self().uid == ::geteuid());
}

TEST_CASE("peer node: with no listen address, its entry's host resolved", "[peer]") {
  JobPeersConfig c = TwoNodes();
  c.peers[1].host = "localhost";  // loopback, as are the others: kept as it resolves
  c.peers[0].host = "127.0.0.1";
  auto node = PeerNode::Make(c);
  REQUIRE(node.ok());
  CHECK((*node)->listen_host == "127.0.0.1");
}

TEST_CASE("peer node: a node not in the list, or an address that does not resolve, is an error",
          "[peer]") {
  JobPeersConfig c = TwoNodes();
  c.self = "n9";
  auto missing = PeerNode::Make(c);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == EINVAL);
  CHECK(missing.status().message().find("'n9'") != std::string::npos);
  c = TwoNodes();
  c.peers[1].host = "no-such-host.invalid";
  auto unresolved = PeerNode::Make(c);
  REQUIRE_FALSE(unresolved.ok());
  CHECK(unresolved.status().code() == EADDRNOTAVAIL);
}

}  // namespace
}  // namespace tierfs
