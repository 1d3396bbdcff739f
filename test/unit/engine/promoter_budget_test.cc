// Promoter and ReadPath over real files, budgets: a chunk read part-way for
// want of room, a RAM budget never exceeded, lru eviction (first-fit is the
// production Belady policy), and the chunks peers offer, kept as promotions
// within a bounded memory. The read path itself is in
// promoter_read_path_test.cc, failures and directory tiers in
// promoter_dir_tier_test.cc.
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "eventually.h"
#include "fault_backend.h"
#include "promotion_stack.h"
#include "tiering/namespace/chunk_homes.h"

namespace tierfs {
namespace {

// Homes that are all this node: enough for a ChunkSource "with peers" whose
// offer budget alone is tested.
class NoHomes final : public ChunkHomes {
 public:
  int Home(ChunkKey) const override { return -1; }
  ssize_t Fetch(int, ChunkKey, uint64_t, size_t, char*, bool, const std::function<ssize_t(char*)>&,
                bool*) override {
    return -EIO;
  }
  bool Offer(int, ChunkKey, const char*, size_t) override { return false; }
  bool AskAhead(int, ChunkKey) override { return false; }
};

using testing::kMiB;
using testing::Op;
using testing::Ram;
using testing::Source;
using testing::Stack;

TEST_CASE("A chunk read part-way from SOURCE for want of room stays there when room frees",
          "[promoter][read_path]") {
  // Promoting it then would read from SOURCE again the pieces its reader
  // has already read there (shards-2x in order mode read ~3% of its dataset
  // twice per steady epoch).
  constexpr uint64_t kChunk = 64 << 10;
  Source source({kChunk, 3 * kChunk});
  Stack stack(&source, Ram(kChunk), kChunk);  // room for one chunk
  // f0's promotion holds the room, and then fails (its reader reads SOURCE).
  source.faults().SetDelay(std::chrono::milliseconds(300));
  source.faults().Fail(Op::kRead, "f0", EIO, 1);
  ssize_t r0 = 0;
  std::thread f0([&] { stack.Read(0, 0, 4096, &r0); });
  REQUIRE(testing::Eventually([&] { return stack.State(0) == Catalog::kInFlight; }));
  ssize_t r = 0;
  CHECK(stack.Read(1, 0, 4096, &r) == source.Contents(1).substr(0, 4096));  // no room: SOURCE
  f0.join();
  CHECK(r0 == 4096);
  stack.Drain();
  source.faults().SetDelay({});
  REQUIRE(stack.tier(0).used() == 0);  // the room is free again
  CHECK(stack.Read(1, 4096, 4096, &r) == source.Contents(1).substr(4096, 4096));
  stack.Drain();
  CHECK(stack.State(1, 0) == Catalog::kOnSource);
  CHECK(stack.reads().bypass_kept == 1);
  // The next chunk, read from its start, is promoted as usual.
  CHECK(stack.Read(1, kChunk, 4096, &r) == source.Contents(1).substr(kChunk, 4096));
  stack.Drain();
  CHECK(Catalog::IsResident(stack.State(1, 1)));
}

TEST_CASE("A RAM budget smaller than the dataset is never exceeded", "[promoter][read_path]") {
  std::vector<size_t> sizes;
  for (size_t i = 0; i < 10; ++i) sizes.push_back(10000 + i);
  Source source(sizes);
  const uint64_t budget = 35000;
  Stack stack(&source, Ram(budget), kMiB);
  for (size_t i = 0; i < 10; ++i) {
    stack.ReadFile(i);
    CHECK(stack.tier(0).used() <= budget);
  }
  uint64_t total = 0, absent = 0;
  for (size_t i = 0; i < 10; ++i) {
    total += sizes[i];
    if (!stack.Resident(i)) absent += sizes[i];
    CHECK(stack.Resident(i) == (i < 3));  // first come, first placed
  }
  CHECK(stack.tier(0).used() == 30003);
  CHECK(source.read_bytes() == total);
  CHECK(stack.promotions().no_room == 7);
  for (size_t i = 0; i < 10; ++i) stack.ReadFile(i);
  CHECK(source.read_bytes() - total == absent);  // the second pass reads only what is absent
  CHECK(stack.tier(0).used() == 30003);
}

TEST_CASE("lru evicts through the store and keeps within the budget", "[promoter][read_path]") {
  std::vector<size_t> sizes(10, 10000);
  Source source(sizes);
  const uint64_t budget = 35000;  // three files
  Stack stack(&source, Ram(budget), kMiB, "lru");
  for (size_t i = 0; i < 10; ++i) {
    stack.ReadFile(i);
    CHECK(stack.tier(0).used() <= budget);
  }
  for (size_t i = 0; i < 10; ++i) CHECK(stack.Resident(i) == (i >= 7));
  CHECK(stack.promotions().evicted == 7);
  CHECK(stack.tier(0).chunks() == 3);
  CHECK(stack.tier(0).used() == 30000);

  const uint64_t before = source.read_bytes();
  stack.ReadFile(8);  // a hit, which makes 7 the least recently used
  CHECK(source.read_bytes() == before);
  stack.ReadFile(0);
  CHECK(source.read_bytes() == before + 10000);
  CHECK_FALSE(stack.Resident(7));
  CHECK(stack.Resident(8));
  CHECK(stack.Resident(9));
  CHECK(stack.Resident(0));
  CHECK(stack.tier(0).chunks() == 3);
}

TEST_CASE(
    "A file read elsewhere (a passthrough open) counts as used: lru keeps it, the "
    "observer hears a whole read",
    "[promoter][read_path]") {
  std::vector<size_t> sizes(4, 10000);
  Source source(sizes);
  Stack stack(&source, Ram(35000), kMiB, "lru");  // three files
  struct Heard : ReadObserver {
    void OnRead(NodeId id, uint64_t off, uint64_t len, bool hit) override {
      reads.push_back({id, off, len, hit});
    }
    struct Read {
      NodeId id;
      uint64_t off, len;
      bool hit;
    };
    std::vector<Read> reads;
  } heard;
  for (size_t i = 0; i < 3; ++i) stack.ReadFile(i);
  stack.read_path().SetObserver(&heard);
  // File 0, the least recently used, is opened in passthrough: the kernel
  // reads it from its tier file, the read path never sees those reads.
  stack.read_path().NoteReadElsewhere(source.Id(0));
  REQUIRE(heard.reads.size() == 1);
  CHECK(heard.reads[0].id == source.Id(0));
  CHECK(heard.reads[0].off == 0);
  CHECK(heard.reads[0].len == 10000);
  CHECK(heard.reads[0].hit);
  stack.read_path().SetObserver(nullptr);
  stack.ReadFile(3);  // evicts the least recently used: file 1 now, not 0
  CHECK(stack.Resident(0));
  CHECK_FALSE(stack.Resident(1));
  CHECK(stack.Resident(3));
}

TEST_CASE("lru: the first read of a huge file evicts only for promotions it can queue (issue 11)",
          "[promoter][read_path]") {
  constexpr uint64_t kChunk = 4096;
  std::vector<size_t> sizes(8, kChunk);
  sizes.push_back(200 * kChunk);  // file 8: 200 chunks
  Source source(sizes);
  // Room for the eight small files; one promotion thread, lanes of 2.
  Stack stack(&source, Ram(8 * kChunk), kChunk, "lru", 1, std::chrono::seconds(10), 2);
  for (size_t i = 0; i < 8; ++i) stack.ReadFile(i);
  REQUIRE(stack.tier(0).chunks() == 8);
  source.faults().SetDelay(std::chrono::milliseconds(20));  // the lane stays full
  ssize_t r = 0;
  CHECK(stack.Read(8, 0, kChunk, &r) == source.Contents(8).substr(0, kChunk));
  // One request per chunk until the background lane (2) is full, then stop:
  // not one claim, eviction and rejection for each of the 199 other chunks.
  CHECK(stack.promoter().rejected() <= 1);
  stack.Drain();
  CHECK(stack.promotions().evicted <= 4);  // chunk 0, two queued, one running
  CHECK(stack.tier(0).chunks() >= 4);      // the small files are not all gone
  source.faults().SetDelay({});
}

TEST_CASE("lru under 8 concurrent readers serves exact bytes within the budget",
          "[promoter][read_path]") {
  std::vector<size_t> sizes;
  for (size_t i = 0; i < 24; ++i) sizes.push_back(3000 + 97 * i);
  Source source(sizes);
  const uint64_t budget = 20000;
  Stack stack(&source, Ram(budget), kMiB, "lru");
  std::atomic<bool> done{false};
  std::atomic<uint64_t> max_used{0};
  std::thread monitor([&] {
    while (!done.load()) {
      uint64_t used = stack.tier(0).used();
      if (used > max_used.load()) max_used = used;
      std::this_thread::yield();
    }
  });
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (size_t t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      for (size_t n = 0; n < 150; ++n) {
        size_t i = (n * 7 + t * 5 + n * n) % sizes.size();
        uint64_t off = (n * 131) % sizes[i];
        ssize_t r = 0;
        if (stack.Read(i, off, 2000, &r) != source.Contents(i).substr(off, 2000)) bad++;
      }
    });
  }
  for (auto& t : readers) t.join();
  stack.Drain();
  done = true;
  monitor.join();
  CHECK(bad == 0);
  CHECK(max_used.load() <= budget);
  CHECK(stack.tier(0).used() <= budget);
  CHECK(stack.promotions().evicted > 0);
  // The tier and the catalog agree on what is resident.
  CHECK(stack.catalog().ResidentChunksPerTier(1)[0] == stack.tier(0).chunks());
}

TEST_CASE("A chunk a peer offers is kept as a promotion, reads of it are hits, not SOURCE's",
          "[promoter][read_path]") {
  Source source({100000, 5000, 100000});
  Stack stack(&source, Ram(150000), kMiB);
  const std::string& bytes = source.Contents(0);
  const NodeId f0 = source.Id(0);
  CHECK(stack.read_path().Holds(f0, 0) == false);
  CHECK(stack.read_path().Adopt(f0, 0, bytes.data(), bytes.size()) == 0);
  CHECK(stack.read_path().Holds(f0, 0));
  CHECK(stack.Resident(0));
  CHECK(stack.promoter().adopted() == 1);
  // Kept once: a second offer of it is refused.
  CHECK(stack.read_path().Adopt(f0, 0, bytes.data(), bytes.size()) == -EEXIST);
  ssize_t r = 0;
  CHECK(stack.Read(0, 0, 100000, &r) == bytes);
  CHECK(stack.reads().tier_reads == 1);
  CHECK(source.read_bytes() == 0);  // this node never read SOURCE for it
  // Bytes of another length are not the chunk: nothing kept, room given back.
  const std::string& f1 = source.Contents(1);
  CHECK(stack.read_path().Adopt(source.Id(1), 0, f1.data(), f1.size() - 1) == -EINVAL);
  CHECK(stack.State(1) == Catalog::kOnSource);
  CHECK(stack.read_path().Adopt(source.Id(1), 0, f1.data(), f1.size()) == 0);
  CHECK(stack.tier(0).used() == 105000);
  // No room (first-fit evicts nothing for a chunk nobody declared a use of).
  const std::string& f2 = source.Contents(2);
  CHECK(stack.read_path().Adopt(source.Id(2), 0, f2.data(), f2.size()) == -ENOSPC);
  CHECK(stack.State(2) == Catalog::kOnSource);
  CHECK(stack.promoter().adopted() == 2);
}

TEST_CASE("Chunks kept whole for their offers hold a bounded amount of memory in all",
          "[promoter][read_path]") {
  NoHomes peers;  // only the budget is used
  ChunkSource with_peers(nullptr, 64 * kMiB, &peers);
  ChunkSource alone(nullptr, 64 * kMiB);
  CHECK(alone.TakeOfferBuffer(kMiB).data() == nullptr);  // no peers: nothing to offer to
  CHECK(with_peers.TakeOfferBuffer(ChunkSource::kMaxOffer + 1).data() == nullptr);
  constexpr uint64_t kOne = ChunkSource::kMaxOffer;
  std::vector<ChunkSource::OfferBuffer> held;
  for (uint64_t n = 0; n + kOne <= ChunkSource::kMaxOfferHeld; n += kOne) {
    held.push_back(with_peers.TakeOfferBuffer(kOne));
    REQUIRE(held.back().data() != nullptr);
  }
  ChunkSource::OfferBuffer& first = held.front();
  std::memset(first.data(), 1, kOne);                         // really there
  CHECK(with_peers.TakeOfferBuffer(kMiB).data() == nullptr);  // the budget is spent
  first = ChunkSource::OfferBuffer();                         // released
  CHECK(with_peers.TakeOfferBuffer(kMiB).data() != nullptr);
}

}  // namespace
}  // namespace tierfs
