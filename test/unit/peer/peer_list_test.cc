// The peer list (-o peers=): files, inline lists, and what is refused.
#include "tiering/peers/config/peer_list.h"

#include <catch2/catch.hpp>

namespace tierfs {
namespace {

using Catch::Matchers::Contains;

TEST_CASE("peer list: a file with names, hosts, ports and comments", "[peer]") {
  auto list = ParsePeerFile(
      "# the job's nodes\n"
      "node01\n"
      "  node02 10.0.0.2   # by address\n"
      "node03 :7801\n"
      "node04\tn4.cluster:7802\r\n"
      "\n",
      7740);
  REQUIRE(list.ok());
  const std::vector<PeerEntry>& peers = *list;
  REQUIRE(peers.size() == 4);
  CHECK(peers[0] == PeerEntry{"node01", "node01", 7740});
  CHECK(peers[1] == PeerEntry{"node02", "10.0.0.2", 7740});
  CHECK(peers[2] == PeerEntry{"node03", "node03", 7801});
  CHECK(peers[3] == PeerEntry{"node04", "n4.cluster", 7802});
}

TEST_CASE("peer list: inline names joined by '+'", "[peer]") {
  auto list = ParsePeerInline("a+b+c", 9000);
  REQUIRE(list.ok());
  REQUIRE(list->size() == 3);
  CHECK((*list)[2] == PeerEntry{"c", "c", 9000});
  CHECK_FALSE(ParsePeerInline("a++b", 9000).ok());
  auto twice = ParsePeerInline("a+a", 9000);
  CHECK(twice.status().code() == EINVAL);
  CHECK_THAT(twice.status().message(), Contains("twice"));
  CHECK_FALSE(ParsePeerInline("", 9000).ok());
}

TEST_CASE("peer list: bad lines are refused with the line number", "[peer]") {
  struct Bad {
    const char* text;
    const char* says;
  };
  for (Bad b : {Bad{"a\nb c d\n", "line 2: expected NAME"}, Bad{"a\n-x\n", "line 2"},
                Bad{"a b:0\n", "not a port"}, Bad{"a b:65536\n", "not a port"},
                Bad{"a b:12x\n", "not a port"}, Bad{"a $(rm):1\n", "not a host"},
                Bad{"a/b\n", "not a valid peer name"}, Bad{"a\na\n", "line 2: 'a' is listed twice"},
                Bad{"# nothing\n\n", "no peers"}, Bad{"", "no peers"}}) {
    INFO(b.text);
    auto list = ParsePeerFile(b.text, 7740);
    CHECK_FALSE(list.ok());
    CHECK_THAT(list.status().message(), Contains(b.says));
  }
  auto no_port = ParsePeerFile("a\n", 0);  // no port anywhere
  CHECK_FALSE(no_port.ok());
  CHECK_THAT(no_port.status().message(), Contains("no port"));
  CHECK(ValidPeerName("node-01.ib_0"));
  CHECK_FALSE(ValidPeerName(std::string(256, 'n')));
  CHECK_FALSE(ValidPeerName(".hidden"));
}

TEST_CASE("peer list: at most kMaxPeers", "[peer]") {
  std::string text;
  for (size_t i = 0; i <= kMaxPeers; ++i) {
    text += 'n';
    text += std::to_string(i);
    text += '\n';
  }
  auto list = ParsePeerFile(text, 7740);
  CHECK_FALSE(list.ok());
  CHECK_THAT(list.status().message(), Contains("more than"));
}

}  // namespace
}  // namespace tierfs
