// Rendezvous hashing: balance over the peers, minimal movement when one
// leaves or returns, independence from the order of the list.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <vector>

#include "tiering/peers/client/rendezvous.h"

namespace tierfs {
namespace {

constexpr int kKeys = 10000;

uint64_t Key(int i) { return ChunkHash(fmt::format("train/class{}/img{}.jpg", i % 97, i), 0); }

TEST_CASE("rendezvous: 4 peers each get about a quarter of 10k keys", "[peer]") {
  Rendezvous r({"node0", "node1", "node2", "node3"});
  std::vector<int> count(4, 0);
  for (int i = 0; i < kKeys; ++i) count[r.Home(Key(i))]++;
  // Binomial(10000, 1/4): sd ~ 43; 2,350..2,650 is 3.5 sd.
  for (int c : count) {
    INFO(fmt::format("{}", fmt::join(count, " ")));
    CHECK(c > 2350);
    CHECK(c < 2650);
  }
}

TEST_CASE("rendezvous: a peer going down moves only its keys, and back", "[peer]") {
  Rendezvous r({"node0", "node1", "node2", "node3"});
  std::vector<bool> live(4, true);
  live[2] = false;
  int moved = 0, to_other[4] = {};
  for (int i = 0; i < kKeys; ++i) {
    int all = r.Home(Key(i));
    int without = r.Home(Key(i), [&](size_t p) { return live[p]; });
    REQUIRE(without != 2);
    if (all != without) {
      CHECK(all == 2);  // only node2's keys move
      moved++;
      to_other[without]++;
    }
    CHECK(r.Home(Key(i)) == all);  // back up: the same home as before
  }
  CHECK(moved > 2350);
  CHECK(moved < 2650);
  // node2's keys spread over the three others.
  for (int p : {0, 1, 3}) CHECK(to_other[p] > moved / 3 - 200);
}

TEST_CASE("rendezvous: the list's order does not matter, no live peer is -1", "[peer]") {
  Rendezvous a({"n0", "n1", "n2"});
  Rendezvous b({"n2", "n0", "n1"});
  for (int i = 0; i < 1000; ++i) CHECK(a.name(a.Home(Key(i))) == b.name(b.Home(Key(i))));
  CHECK(a.Home(Key(1), [](size_t) { return false; }) == -1);
  CHECK(a.Find("n1") == 1);
  CHECK(a.Find("n9") == -1);
  CHECK(ChunkHash("f", 0) != ChunkHash("f", 1));
}

}  // namespace
}  // namespace tierfs
