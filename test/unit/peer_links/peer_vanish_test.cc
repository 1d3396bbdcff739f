// Nodes that go the moment their connections come up: a node asks the
// survivor (the survivor's worker is still wiring up its reply endpoint to
// the node's) and is asked by it (the node's worker wiring up its reply
// endpoint to the survivor's), then is destroyed at once. On UCX 1.13 a
// worker that goes while a reply endpoint to or from it waits for its TCP
// connection aborts the process (an assertion in UCX's purge of the
// endpoint's pending wireup reply): the survivor's progress thread, or the
// node's own ucp_worker_destroy. Here everything is one process, so either
// abort ends the test.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <vector>

#include "peer_fixture.h"

namespace tierfs {
namespace {

using namespace testing;

constexpr uint64_t kChunk = 1 << 16;
constexpr char kFile[] = "vanish.bin";
constexpr uint64_t kSize = 3 * kChunk + 99;

// The survivor serves `kFile` bit-exact to a node that asks now.
void CheckServes(TestNode& survivor, PatternProvider* provider, int cycle) {
  TestNode asker(fmt::format("asker{}", cycle), provider, kChunk);
  asker.StartServer();
  asker.StartClient({survivor.address()});
  REQUIRE(Within(10s, [&] { return asker.client().up(0); }));
  std::vector<char> buf(kChunk);
  ChunkRef ref = Ref(kFile, kSize, 3, kChunk);
  ssize_t n = asker.client().Fetch(0, ref, buf.data(), std::chrono::steady_clock::now() + 5s);
  REQUIRE(n == static_cast<ssize_t>(ref.length()));
  CHECK(IsPattern(kFile, ref.file_offset(), buf.data(), ref.length()));
}

TEST_CASE("peer vanish: 200 nodes that go as their connections come up leave the survivor serving",
          "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add(kFile, kSize);
  TestNode survivor("survivor", &provider, kChunk);
  survivor.StartServer();
  int up_both = 0;
  for (int cycle = 0; cycle < 200; ++cycle) {
    INFO("cycle " << cycle);
    {
      auto node = std::make_unique<TestNode>(fmt::format("v{}", cycle), &provider, kChunk);
      node->StartServer();
      node->StartClient({survivor.address()});
      // The survivor's side of the node's server: a client of its own.
      TestNode dialer(fmt::format("d{}", cycle), &provider, kChunk);
      dialer.StartServer();
      dialer.StartClient({node->address()});
      REQUIRE(Within(10s, [&] { return node->client().up(0) && dialer.client().up(0); }));
      up_both++;
      node.reset();  // at once: no answer waited for here
      // The dialer's link to the node goes down (or its Stop finds it so).
    }
    if (cycle % 50 == 49) CheckServes(survivor, &provider, cycle);
  }
  CHECK(up_both == 200);
  CheckServes(survivor, &provider, 200);
  CHECK(survivor.server().counters().connections >= 200);
}

}  // namespace
}  // namespace tierfs
