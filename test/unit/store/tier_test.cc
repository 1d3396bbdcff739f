// Tier budgets (Reserve/Release/MarkFull) and the RAM tier (NewMemoryTier).
#include "tiering/store/tier.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

namespace tierfs {
namespace {

ChunkOrigin OriginOf(uint64_t length) { return ChunkOrigin{"f", length, 0, 0, length}; }

// Stores `data` as chunk `key` in one Append and commits it.
void Store(Tier& tier, ChunkKey key, const std::string& data) {
  std::unique_ptr<ChunkWriter> writer;
  REQUIRE(tier.BeginStore(key, OriginOf(data.size()), &writer) == 0);
  REQUIRE(writer != nullptr);
  REQUIRE(writer->Append(data.data(), data.size()) == 0);
  REQUIRE(writer->Commit() == 0);
}

TEST_CASE("Tier::Reserve refuses what does not fit and reserves nothing then", "[tier]") {
  auto tier = NewMemoryTier("ram", 100);
  CHECK(tier->budget() == 100);
  CHECK(tier->limit() == 100);
  CHECK(tier->Reserve(60));
  CHECK_FALSE(tier->Reserve(41));
  CHECK(tier->used() == 60);
  CHECK(tier->Reserve(40));
  CHECK(tier->used() == 100);
  CHECK_FALSE(tier->Reserve(1));
  tier->Release(30);
  CHECK(tier->used() == 70);
  CHECK_FALSE(tier->Reserve(31));
  CHECK(tier->Reserve(30));
  CHECK(tier->used() == 100);
  // A reservation larger than the whole budget (no wrap-around in the check).
  tier->Release(100);
  CHECK_FALSE(tier->Reserve(101));
  CHECK_FALSE(tier->Reserve(UINT64_MAX));
  CHECK(tier->used() == 0);
  CHECK(tier->Reserve(0));
}

TEST_CASE("Tier::Reserve from 8 threads never overshoots the budget", "[tier]") {
  constexpr uint64_t kBudget = 100000;
  constexpr uint64_t kPiece = 7;
  auto tier = NewMemoryTier("ram", kBudget);
  std::atomic<uint64_t> granted{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      while (tier->Reserve(kPiece)) granted.fetch_add(1);
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  // Every thread stops at its first refusal, and nothing is released: the
  // grants fill the budget exactly as far as whole pieces go.
  CHECK(granted.load() == kBudget / kPiece);
  CHECK(tier->used() == granted.load() * kPiece);
}

TEST_CASE("Tier::Reserve and Release from 8 threads keep used within the budget", "[tier]") {
  constexpr uint64_t kBudget = 1000;
  auto tier = NewMemoryTier("ram", kBudget);
  std::atomic<uint64_t> over{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        uint64_t n = 1 + static_cast<uint64_t>((i * 37 + t * 101) % 300);
        if (!tier->Reserve(n)) continue;
        if (tier->used() > kBudget) over.fetch_add(1);
        tier->Release(n);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(over.load() == 0);
  CHECK(tier->used() == 0);
}

TEST_CASE("Tier::MarkFull lowers the limit to what is used", "[tier]") {
  auto tier = NewMemoryTier("ram", 1000);
  REQUIRE(tier->Reserve(300));
  tier->MarkFull();
  CHECK(tier->limit() == 300);
  CHECK(tier->budget() == 1000);
  CHECK_FALSE(tier->Reserve(1));
  // Room freed below the lowered limit can be used again, but not beyond it.
  tier->Release(100);
  CHECK(tier->Reserve(100));
  CHECK_FALSE(tier->Reserve(1));
  CHECK(tier->used() == 300);
}

TEST_CASE("MemoryTier stores and reads a chunk without copying", "[tier][memory_tier]") {
  auto tier = NewMemoryTier("ram", 1 << 20);
  CHECK(tier->kind() == Tier::Kind::kMemory);
  const std::string data = "0123456789abcdefghij";
  const ChunkKey key{3, 1};
  Store(*tier, key, data);
  CHECK(tier->chunks() == 1);

  char scratch[64];
  TierRead a, b;
  REQUIRE(tier->Read(key, 4, 6, scratch, &a) == 0);
  CHECK(std::string(a.data, a.size) == "456789");
  CHECK((a.data < scratch || a.data >= scratch + sizeof scratch));  // not copied to scratch
  CHECK(a.hold != nullptr);
  REQUIRE(tier->Read(key, 0, 4, scratch, &b) == 0);
  CHECK(b.data + 4 == a.data);  // both point into the one stored buffer

  // A read past the end is clipped; at or beyond the end it is empty.
  TierRead c;
  REQUIRE(tier->Read(key, 15, 100, scratch, &c) == 0);
  CHECK(std::string(c.data, c.size) == "fghij");
  REQUIRE(tier->Read(key, 20, 10, scratch, &c) == 0);
  CHECK(c.size == 0);
  REQUIRE(tier->Read(key, 99, 10, scratch, &c) == 0);
  CHECK(c.size == 0);
  CHECK(tier->Read(ChunkKey{3, 2}, 0, 1, scratch, &c) == -ENOENT);
}

TEST_CASE("MemoryTier keeps removed bytes alive for a reader holding them", "[tier][memory_tier]") {
  auto tier = NewMemoryTier("ram", 1 << 20);
  const std::string data(4096, 'x');
  const ChunkKey key{1, 0};
  Store(*tier, key, data);
  TierRead out;
  REQUIRE(tier->Read(key, 0, data.size(), nullptr, &out) == 0);
  CHECK(tier->Remove(key) == data.size());
  CHECK(tier->chunks() == 0);
  char scratch[1];
  TierRead gone;
  CHECK(tier->Read(key, 0, 1, scratch, &gone) == -ENOENT);
  // Still readable (ASan would report a use after free otherwise).
  CHECK(std::string(out.data, out.size) == data);
  out.hold.reset();
  CHECK(tier->Remove(key) == 0);
}

TEST_CASE("MemoryTier Append beyond the declared length fails", "[tier][memory_tier]") {
  auto tier = NewMemoryTier("ram", 1 << 20);
  std::unique_ptr<ChunkWriter> writer;
  REQUIRE(tier->BeginStore(ChunkKey{1, 0}, OriginOf(10), &writer) == 0);
  REQUIRE(writer != nullptr);
  CHECK(writer->Append("0123456789a", 11) < 0);
  CHECK(writer->Append("0123456789", 10) == 0);
  CHECK(writer->Append("x", 1) < 0);
  CHECK(writer->Commit() == 0);
  char scratch[16];
  TierRead out;
  REQUIRE(tier->Read(ChunkKey{1, 0}, 0, 16, scratch, &out) == 0);
  CHECK(std::string(out.data, out.size) == "0123456789");
}

// Begins storing `key` as a 10-byte chunk and appends only 5 bytes.
std::unique_ptr<ChunkWriter> BeginHalfWritten(Tier& tier, ChunkKey key) {
  std::unique_ptr<ChunkWriter> writer;
  REQUIRE(tier.BeginStore(key, OriginOf(10), &writer) == 0);
  REQUIRE(writer != nullptr);
  REQUIRE(writer->Append("01234", 5) == 0);
  return writer;
}

TEST_CASE("MemoryTier Commit of an incomplete chunk publishes nothing", "[tier][memory_tier]") {
  auto tier = NewMemoryTier("ram", 1 << 20);
  const ChunkKey key{1, 0};
  auto writer = BeginHalfWritten(*tier, key);
  char scratch[16];
  TierRead out;
  CHECK(tier->Read(key, 0, 1, scratch, &out) == -ENOENT);  // nothing before Commit
  CHECK(writer->Commit() < 0);
  CHECK(tier->chunks() == 0);
  CHECK(tier->Read(key, 0, 1, scratch, &out) == -ENOENT);
}

// Regression: Commit of an incomplete chunk failed but left the writer open,
// so more Appends and a second Commit published it, against the contract
// "Commit: 0 or -errno (then aborted)".
TEST_CASE("Regression: MemoryTier failed Commit aborts the writer", "[tier][memory_tier]") {
  auto tier = NewMemoryTier("ram", 1 << 20);
  auto writer = BeginHalfWritten(*tier, ChunkKey{1, 0});
  REQUIRE(writer->Commit() < 0);
  CHECK(writer->Append("56789", 5) < 0);
  CHECK(writer->Commit() < 0);
  CHECK(tier->chunks() == 0);
}

TEST_CASE("MemoryTier Abort publishes nothing", "[tier][memory_tier]") {
  auto tier = NewMemoryTier("ram", 1 << 20);
  {
    std::unique_ptr<ChunkWriter> writer;
    REQUIRE(tier->BeginStore(ChunkKey{1, 0}, OriginOf(3), &writer) == 0);
    REQUIRE(writer->Append("abc", 3) == 0);
    writer->Abort();
    writer->Abort();  // idempotent
    CHECK(writer->Commit() < 0);
  }
  {
    std::unique_ptr<ChunkWriter> writer;
    REQUIRE(tier->BeginStore(ChunkKey{2, 0}, OriginOf(3), &writer) == 0);
    REQUIRE(writer->Append("abc", 3) == 0);
  }  // destroyed without Commit
  CHECK(tier->chunks() == 0);
}

TEST_CASE("MemoryTier Remove returns the chunk's length", "[tier][memory_tier]") {
  auto tier = NewMemoryTier("ram", 1 << 20);
  Store(*tier, ChunkKey{1, 0}, std::string(1234, 'a'));
  Store(*tier, ChunkKey{1, 1}, std::string(10, 'b'));
  CHECK(tier->chunks() == 2);
  CHECK(tier->Remove(ChunkKey{1, 1}) == 10);
  CHECK(tier->Remove(ChunkKey{1, 0}) == 1234);
  CHECK(tier->Remove(ChunkKey{1, 0}) == 0);
  CHECK(tier->Remove(ChunkKey{9, 9}) == 0);
  CHECK(tier->chunks() == 0);
}

}  // namespace
}  // namespace tierfs
