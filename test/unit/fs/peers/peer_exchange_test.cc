// Peers in one process over UCX on loopback: chunks move bit-exact between
// nodes, concurrently, within the in-flight bounds; error answers map to
// -errno; the counters say what moved.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "fs/telemetry/counter_json.h"
#include "fs/telemetry/prometheus.h"
#include "peer_fixture.h"
#include "require_ok.h"
#include "tiering/base/json_value.h"

namespace tierfs {
namespace {

using namespace testing;

constexpr uint64_t kChunk = 1 << 20;

// The files every node's snapshot has: sizes that end mid-chunk, and small ones.
const std::vector<std::pair<std::string, uint64_t>>& Files() {
  static const std::vector<std::pair<std::string, uint64_t>> files = {
      {"shard-000.tar", 5 * kChunk + 12345},
      {"shard-001.tar", 3 * kChunk},
      {"train/cat/1.jpg", 117000},
      {"train/dog/2.jpg", 1},
  };
  return files;
}

struct Cluster {
  explicit Cluster(int n, PeerServerOptions server = {}, PeerClientOptions client = {}) {
    for (int i = 0; i < n; ++i) {
      providers.push_back(std::make_unique<PatternProvider>(kChunk));
      for (auto& [path, size] : Files()) providers.back()->Add(path, size, kMtime);
      nodes.push_back(std::make_unique<TestNode>(fmt::format("node{}", i), providers.back().get(),
                                                 kChunk, 0, server));
      nodes.back()->StartServer();
    }
    for (int i = 0; i < n; ++i) {
      std::vector<PeerAddress> others;
      for (int j = 0; j < n; ++j) {
        if (j != i) others.push_back(nodes[j]->address());
      }
      nodes[i]->StartClient(others, client);
    }
    for (auto& node : nodes) {
      PeerClient& c = node->client();
      REQUIRE(Within(10s, [&] {
        for (size_t p = 0; p < c.size(); ++p) {
          if (!c.up(p)) return false;
        }
        return true;
      }));
    }
  }
  std::vector<std::unique_ptr<PatternProvider>> providers;
  std::vector<std::unique_ptr<TestNode>> nodes;
};

ChunkRef Ref(std::string_view path, uint64_t size, uint32_t chunk) {
  return testing::Ref(path, size, chunk, kChunk);
}

PeerClient::Deadline In(std::chrono::milliseconds d) {
  return std::chrono::steady_clock::now() + d;
}

TEST_CASE("peers: a byte range of a chunk, bit-exact, and only its bytes sent", "[peer]") {
  if (!PeersCanRun()) return;
  Cluster cluster(2);
  const auto& [path, size] = Files().front();
  REQUIRE(size > 2 * kChunk);
  ChunkRef ref = Ref(path, size, 1);
  ref.range_off = 4097;
  ref.range_len = 70001;
  std::vector<char> buf(kChunk, 0);
  ssize_t n = cluster.nodes[0]->client().Fetch(0, ref, buf.data(), In(5s));
  REQUIRE(n == 70001);
  CHECK(IsPattern(path, kChunk + 4097, buf.data(), 70001));
  CHECK(buf[70001] == 0);  // nothing written past the range
  CHECK(cluster.nodes[0]->client().counters(0).fetched_bytes == 70001);
  const PeerServerCounters& s = cluster.nodes[1]->server().counters();
  CHECK(Within(2s, [&] { return s.served_bytes == 70001; }));
  // A range past the chunk's end is refused by the asker, not sent.
  ref.range_len = kChunk;
  CHECK(cluster.nodes[0]->client().Fetch(0, ref, buf.data(), In(5s)) == -EINVAL);
}

TEST_CASE("peers: two nodes exchange every chunk bit-exact", "[peer]") {
  if (!PeersCanRun()) return;
  Cluster cluster(2);
  cluster.providers[1]->held = true;  // node1 serves from memory it holds, node0 from scratch
  std::vector<char> buf(kChunk);
  uint64_t chunks = 0, bytes = 0;
  for (auto& [path, size] : Files()) {
    for (uint32_t c = 0; c * kChunk < size; ++c) {
      ChunkRef ref = Ref(path, size, c);
      for (int asker = 0; asker < 2; ++asker) {
        std::fill(buf.begin(), buf.end(), 0);
        ssize_t n = cluster.nodes[asker]->client().Fetch(0, ref, buf.data(), In(5s));
        INFO(fmt::format("{} chunk {} asked by node{}", path, c, asker));
        REQUIRE(n == static_cast<ssize_t>(ref.length()));
        CHECK(IsPattern(path, ref.file_offset(), buf.data(), ref.length()));
      }
      chunks++;
      bytes += ref.length();
    }
  }
  for (int i = 0; i < 2; ++i) {
    const PeerLinkCounters& c = cluster.nodes[i]->client().counters(0);
    CHECK(c.fetched_chunks == chunks);
    CHECK(c.fetched_bytes == bytes);
    CHECK(cluster.nodes[i]->client().latency().count() == chunks);
    CHECK(c.latency_us > 0);
    // The server counts a chunk when its send completes, just after the asker has it.
    const PeerServerCounters& s = cluster.nodes[i]->server().counters();
    CHECK(Within(2s, [&] { return s.served_chunks == chunks; }));
    CHECK(s.served_bytes == bytes);
    CHECK(cluster.nodes[i]->server().counters().connections == 1);
    CHECK(cluster.providers[i]->calls == static_cast<int>(chunks));
  }
}

TEST_CASE("peers: four nodes, eight threads each, fetch from each chunk's home", "[peer]") {
  if (!PeersCanRun()) return;
  PeerClientOptions client;
  client.max_in_flight = 3;
  Cluster cluster(4, {}, client);
  std::vector<std::string> names;
  for (int i = 0; i < 4; ++i) names.push_back(fmt::format("node{}", i));
  Rendezvous homes(names);
  std::atomic<int> wrong{0}, fetched{0}, failed{0};
  std::vector<std::thread> threads;
  for (int node = 0; node < 4; ++node) {
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, node, t] {
        std::vector<char> buf(kChunk);
        PeerClient& client = cluster.nodes[node]->client();
        for (int round = 0; round < 3; ++round) {
          for (auto& [path, size] : Files()) {
            for (uint32_t c = (t + round) % 2; c * kChunk < size; c += 2) {
              int home = homes.Home(ChunkHash(path, c));
              if (home == node) continue;  // this node's own chunk: read locally
              size_t peer = static_cast<size_t>(home < node ? home : home - 1);
              ChunkRef ref = Ref(path, size, c);
              ssize_t n = client.Fetch(peer, ref, buf.data(), In(10s));
              if (n != static_cast<ssize_t>(ref.length()))
                failed++;
              else if (!IsPattern(path, ref.file_offset(), buf.data(), n))
                wrong++;
              else
                fetched++;
            }
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
  CHECK(failed == 0);
  CHECK(fetched > 100);
  CHECK(Within(2s, [&] {
    uint64_t served = 0;
    for (auto& node : cluster.nodes) served += node->server().counters().served_chunks;
    return served == static_cast<uint64_t>(fetched.load());
  }));
}

TEST_CASE("peers: answers for a file another snapshot describes are errors", "[peer]") {
  if (!PeersCanRun()) return;
  Cluster cluster(2);
  PeerClient& c = cluster.nodes[0]->client();
  std::vector<char> buf(kChunk);
  auto [path, size] = Files()[0];
  ChunkRef ref = Ref(path, size, 0);
  ChunkRef missing = Ref("no/such/file", size, 0);
  CHECK(c.Fetch(0, missing, buf.data(), In(5s)) == -ENOENT);
  ChunkRef changed = ref;
  changed.mtime_ns = kMtime + 1;
  CHECK(c.Fetch(0, changed, buf.data(), In(5s)) == -ESTALE);
  // Rewritten in place with the same size and mtime (cp -p, rsync -a): the
  // ctime moved, and another inode if the copy replaced the file.
  ChunkRef rewritten = ref;
  rewritten.ctime_ns = kCtime + 1;
  CHECK(c.Fetch(0, rewritten, buf.data(), In(5s)) == -ESTALE);
  ChunkRef replaced = ref;
  replaced.ino = kIno + 1;
  CHECK(c.Fetch(0, replaced, buf.data(), In(5s)) == -ESTALE);
  ChunkRef grown = Ref(path, size + kChunk, 5);
  CHECK(c.Fetch(0, grown, buf.data(), In(5s)) == -ESTALE);
  ChunkRef other_chunking = ref;
  other_chunking.chunk_size = 2 * kChunk;
  CHECK(c.Fetch(0, other_chunking, buf.data(), In(5s)) == -EINVAL);
  ChunkRef outside = Ref(path, size, 6);  // not a valid reference: never sent
  CHECK(c.Fetch(0, outside, buf.data(), In(5s)) == -EINVAL);
  CHECK(c.counters(0).errors == 6);
  CHECK(c.up(0));  // errors are answers: the peer stays up
  CHECK(c.Fetch(0, ref, buf.data(), In(5s)) == static_cast<ssize_t>(kChunk));
  CHECK(cluster.nodes[1]->server().counters().errors == 6);
}

TEST_CASE("peers: in-flight requests are bounded per peer and in the server", "[peer]") {
  if (!PeersCanRun()) return;
  PeerServerOptions server;
  server.threads = 2;
  server.max_in_flight = 3;
  PeerClientOptions client;
  client.max_in_flight = 2;
  Cluster cluster(3, server, client);
  auto [path, size] = Files()[0];
  cluster.providers[2]->Stall();
  // node0 and node1 each send two requests to node2 (their bound); the
  // server takes three (its bound) and answers the fourth kBusy.
  std::atomic<int> ok{0}, busy{0};
  std::vector<std::thread> threads;
  for (int node = 0; node < 2; ++node) {
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, node, t] {
        std::vector<char> buf(kChunk);
        ssize_t n = cluster.nodes[node]->client().Fetch(1, Ref(path, size, t), buf.data(), In(5s));
        if (n == static_cast<ssize_t>(kChunk))
          ok++;
        else if (n == -EBUSY)
          busy++;
      });
    }
  }
  // Two callers per node wait for a slot (bounded by 2 per peer); one of the
  // four sent is refused by the server (bounded by 3).
  REQUIRE(Within(5s, [&] { return cluster.nodes[2]->server().counters().busy >= 1; }));
  CHECK(cluster.providers[2]->calls <= 2);  // two threads
  cluster.providers[2]->Release();
  for (auto& t : threads) t.join();
  CHECK(ok + busy == 6);
  CHECK(busy >= 1);
  CHECK(Within(2s, [&] {
    return cluster.nodes[2]->server().counters().served_chunks == static_cast<uint64_t>(ok.load());
  }));
}

TEST_CASE("peers: the counters reach stats JSON and Prometheus", "[peer]") {
  if (!PeersCanRun()) return;
  Cluster cluster(2);
  std::vector<char> buf(kChunk);
  auto [path, size] = Files()[0];
  REQUIRE(cluster.nodes[0]->client().Fetch(0, Ref(path, size, 5), buf.data(), In(5s)) == 12345);
  PeerServer& server = cluster.nodes[1]->server();
  REQUIRE(Within(2s, [&] { return server.counters().served_chunks == 1; }));
  auto walk = [&](CounterVisitor& v) {
    v.BeginGroup("peers");
    cluster.nodes[0]->client().VisitCounters(v);
    server.VisitCounters(v);
    v.EndGroup();
  };
  JsonCounterWriter json;
  walk(json);
  auto doc = RequireOk(ParseJson(json.Finish()));
  CHECK(doc.Uint("peers.up") == 1);
  CHECK(doc.Uint("peers.server.served_chunks") == 1);
  CHECK(doc.Uint("peers.server.served_bytes") == 12345);
  CHECK(doc.Uint("peers.server.authenticated") == 1);
  const JsonValue* remote = doc.Find("peers.remote");
  REQUIRE((remote != nullptr && remote->is_array() && remote->items().size() == 1));
  CHECK(remote->items()[0].String("name") == "node1");
  CHECK(remote->items()[0].Uint("fetched_bytes") == 12345);
  const JsonValue* served = doc.Find("peers.server.by_peer");
  REQUIRE((served != nullptr && served->items().size() == 1));
  CHECK(served->items()[0].String("name") == "node0");

  PrometheusCounterWriter prometheus;
  walk(prometheus);
  std::string text = prometheus.Finish();
  CHECK_THAT(text,
             Catch::Contains("tierfs_peers_remote_fetched_bytes_total{peer=\"node1\"} 12345"));
  CHECK_THAT(text, Catch::Contains("tierfs_peers_server_served_bytes_total 12345"));
  // Per peer in a family of its own: the total's family has one sample.
  CHECK_THAT(text,
             Catch::Contains("tierfs_peers_server_by_peer_bytes_total{peer=\"node0\"} 12345"));
  CHECK_THAT(text, !Catch::Contains("tierfs_peers_server_served_bytes_total{"));
  CHECK_THAT(text, Catch::Contains("tierfs_peers_server_refused_replayed_total 0"));
  CHECK_THAT(text, Catch::Contains("tierfs_peers_fetch_latency_seconds_count 1"));
}

}  // namespace
}  // namespace tierfs
