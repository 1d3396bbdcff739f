// Catalog: chunking of a snapshot and the per-chunk state machine.
#include "tiering/store/catalog.h"

#include <catch2/catch.hpp>
#include <thread>

#include "require_ok.h"
#include "temp_tree.h"

namespace tierfs {
namespace {

using testing::TempTree;

constexpr uint64_t kChunk = 4096;

// A snapshot of files whose sizes sit on and around chunk boundaries, plus a
// directory and a symlink (which have no chunks).
class Files {
 public:
  Files() {
    tree_.Write("empty", "");
    tree_.Write("one", "x");
    tree_.Write("exact", std::string(kChunk, 'e'));
    tree_.Write("plus", std::string(kChunk + 1, 'p'));
    tree_.Write("many", std::string(10 * kChunk + 5, 'm'));
    tree_.Mkdir("d");
    tree_.Symlink("one", "l");
    auto backend = RequireOk(NewPosixBackend(tree_.root()));
    ns_ = RequireOk(ScanNamespace(backend.get(), ScanOptions{}));
  }
  const Namespace& ns() const { return *ns_; }
  NodeId Id(const std::string& rel) const { return *ns_->Resolve(rel); }

 private:
  TempTree tree_;
  std::unique_ptr<Namespace> ns_;
};

TEST_CASE("Catalog splits files into chunks", "[catalog]") {
  Files files;
  Catalog catalog(files.ns(), kChunk);
  CHECK(catalog.chunk_size() == kChunk);
  CHECK(catalog.chunks(files.Id("empty")) == 0);
  CHECK(catalog.chunks(files.Id("one")) == 1);
  CHECK(catalog.length(files.Id("one"), 0) == 1);
  CHECK(catalog.chunks(files.Id("exact")) == 1);
  CHECK(catalog.length(files.Id("exact"), 0) == kChunk);
  CHECK(catalog.chunks(files.Id("plus")) == 2);
  CHECK(catalog.length(files.Id("plus"), 0) == kChunk);
  CHECK(catalog.length(files.Id("plus"), 1) == 1);
  const NodeId many = files.Id("many");
  CHECK(catalog.chunks(many) == 11);
  for (uint32_t c = 0; c < 10; ++c) CHECK(catalog.length(many, c) == kChunk);
  CHECK(catalog.length(many, 10) == 5);
  CHECK(catalog.length(many, 11) == 0);  // past the end
  CHECK(catalog.chunks(files.Id("d")) == 0);
  CHECK(catalog.chunks(files.Id("l")) == 0);
  CHECK(catalog.chunks(kRootNode) == 0);
  uint64_t total = 0;
  for (NodeId id = 0; id < files.ns().size(); ++id) total += catalog.chunks(id);
  CHECK(total == 0 + 1 + 1 + 2 + 11);
  for (uint32_t c = 0; c < 11; ++c) CHECK(catalog.state(ChunkKey{many, c}) == Catalog::kOnSource);
}

TEST_CASE("Catalog::TryBegin lets exactly one of 16 threads begin", "[catalog]") {
  Files files;
  Catalog catalog(files.ns(), kChunk);
  const NodeId many = files.Id("many");
  std::atomic<int> winners[11] = {};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (uint32_t c = 0; c < 11; ++c) {
        if (catalog.TryBegin(ChunkKey{many, c})) winners[c].fetch_add(1);
      }
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  for (uint32_t c = 0; c < 11; ++c) {
    CHECK(winners[c].load() == 1);
    CHECK(catalog.state(ChunkKey{many, c}) == Catalog::kInFlight);
  }
}

TEST_CASE("Catalog state changes follow the state machine", "[catalog]") {
  Files files;
  Catalog catalog(files.ns(), kChunk);
  const ChunkKey k{files.Id("plus"), 1};
  CHECK(catalog.TryBegin(k));
  CHECK_FALSE(catalog.TryBegin(k));
  CHECK_FALSE(catalog.Evict(k, 0));  // in flight, not resident
  catalog.Abort(k);
  CHECK(catalog.state(k) == Catalog::kOnSource);
  CHECK(catalog.TryBegin(k));
  catalog.Publish(k, 1);
  CHECK(catalog.state(k) == Catalog::kResidentBase + 1);
  CHECK(Catalog::IsResident(catalog.state(k)));
  CHECK(Catalog::TierOf(catalog.state(k)) == 1);
  CHECK_FALSE(catalog.TryBegin(k));
  CHECK_FALSE(catalog.Evict(k, 0));  // the wrong tier
  CHECK_FALSE(catalog.Evict(k, 2));
  CHECK(catalog.state(k) == Catalog::kResidentBase + 1);
  CHECK(catalog.Evict(k, 1));
  CHECK(catalog.state(k) == Catalog::kOnSource);
  CHECK_FALSE(catalog.Evict(k, 1));
  CHECK(catalog.state(ChunkKey{k.node, 0}) == Catalog::kOnSource);  // its neighbour untouched
}

TEST_CASE("Catalog::Recover makes a chunk on SOURCE resident at once, and nothing else",
          "[catalog]") {
  Files files;
  Catalog catalog(files.ns(), kChunk);
  const ChunkKey k{files.Id("plus"), 0};
  CHECK(catalog.Recover(k, 2));
  CHECK(catalog.state(k) == Catalog::kResidentBase + 2);
  CHECK_FALSE(catalog.Recover(k, 1));  // resident: kept where it is
  CHECK(catalog.state(k) == Catalog::kResidentBase + 2);
  const ChunkKey flying{files.Id("plus"), 1};
  REQUIRE(catalog.TryBegin(flying));
  CHECK_FALSE(catalog.Recover(flying, 0));  // a claim's: never taken over
  CHECK(catalog.state(flying) == Catalog::kInFlight);
}

TEST_CASE("Catalog counts resident chunks per tier and fully resident files", "[catalog]") {
  Files files;
  Catalog catalog(files.ns(), kChunk);
  auto publish = [&](const std::string& rel, uint32_t c, int tier) {
    ChunkKey k{files.Id(rel), c};
    REQUIRE(catalog.TryBegin(k));
    catalog.Publish(k, tier);
  };
  CHECK(catalog.ResidentChunksPerTier(2) == std::vector<uint64_t>{0, 0});
  CHECK(catalog.FullyResidentFiles() == 0);  // an empty file does not count
  publish("one", 0, 0);
  publish("plus", 0, 0);
  publish("plus", 1, 1);                                      // a file across two tiers
  for (uint32_t c = 0; c < 10; ++c) publish("many", c, 1);    // all but the last chunk
  REQUIRE(catalog.TryBegin(ChunkKey{files.Id("exact"), 0}));  // in flight: not resident
  CHECK(catalog.ResidentChunksPerTier(2) == std::vector<uint64_t>{2, 11});
  CHECK(catalog.ResidentChunksPerTier(1) == std::vector<uint64_t>{2});
  CHECK(catalog.FullyResidentFiles() == 2);
  publish("many", 10, 0);
  CHECK(catalog.FullyResidentFiles() == 3);
  CHECK(catalog.Evict(ChunkKey{files.Id("one"), 0}, 0));
  CHECK(catalog.FullyResidentFiles() == 2);
  CHECK(catalog.ResidentChunksPerTier(2) == std::vector<uint64_t>{2, 11});
}

}  // namespace
}  // namespace tierfs
