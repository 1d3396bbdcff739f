// Engine after a restart: what a directory tier kept is reused when
// SOURCE and the chunking still match, and dropped when they do not.
#include <catch2/catch.hpp>

#include "eventually.h"
#include "prefetch/assembly/engine.h"
#include "promotion_stack.h"
#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/io/file_io.h"
#include "tiering/store/tier_journal.h"

namespace tierfs {
namespace {

using testing::kMiB;
using testing::PatternBytes;
using testing::ReadVia;
using testing::Source;
using testing::TempTree;

TEST_CASE("Engine reuses a directory tier's chunks after a restart", "[engine]") {
  Source source({70000, 20000});
  TempTree tier_dir;
  TieringConfig config;
  config.dirs.push_back(DirectoryTierSpec{tier_dir.root(), kMiB});
  config.chunk_size = 64 * 1024;
  config.promote_threads = 2;
  auto open = [&] {
    auto store = RequireOk(Engine::Open(config, source.ns(), source.reader(), 0));
    store->Start();
    return store;
  };
  auto read_all = [&](Engine& store, size_t i) {
    ssize_t r = 0;
    CHECK(ReadVia(store.read_path(), source.Id(i), 0, source.Contents(i).size(), &r) ==
          source.Contents(i));
  };
  {
    auto store = open();
    read_all(*store, 0);
    read_all(*store, 1);
    CHECK(source.read_bytes() == 90000);
    // A miss into a directory tier is committed on a pool thread, and a
    // commit still queued when the store shuts down is dropped: wait for
    // them (the suite under load once shut down before the last one).
    CHECK(testing::Eventually([&] {
      for (size_t i = 0; i < 2; ++i) {
        const NodeId id = source.Id(i);
        for (uint32_t c = 0; c < store->chunks()->catalog().chunks(id); ++c) {
          if (!Catalog::IsResident(store->chunks()->state(ChunkKey{id, c}))) return false;
        }
      }
      return true;
    }));
  }
  SECTION("unchanged SOURCE: every chunk is reused") {
    source.Rescan();
    auto store = open();
    read_all(*store, 0);
    read_all(*store, 1);
    CHECK(source.read_bytes() == 90000);
  }
  SECTION("a file changed on SOURCE: its stale chunks are dropped") {
    source.Rewrite(1, PatternBytes(20000, 99));  // same size, other bytes, other mtime
    source.Rescan();
    auto store = open();
    read_all(*store, 1);
    CHECK(source.read_bytes() == 90000 + 20000);
    read_all(*store, 0);
    CHECK(source.read_bytes() == 90000 + 20000);
  }
  SECTION("a record whose range is not its chunk's: that chunk is dropped") {
    // Chunk 0 of file 0 recorded 4 KiB further on: a range of the tier file
    // with bytes all through it (no hole), of the right length, in a file of
    // the right size. Only the check that a range starts at its chunk's
    // offset (chunk * chunk_size) tells it from a good copy.
    auto io = NewPosixFileIo();
    TierJournal journal(io.get(), tier_dir.root() + "/journal");
    TierJournal::Entries entries;
    REQUIRE(journal.Load(config.source_id, &entries) == 0);
    bool moved = false;
    for (auto& [number, record] : entries) {
      if (record.origin.path == Source::Name(0) && record.origin.chunk == 0) {
        record.origin.offset += 4096;
        moved = true;
      }
    }
    REQUIRE(moved);
    REQUIRE(journal.Rewrite(config.source_id, entries) == 0);
    source.Rescan();
    auto store = open();
    read_all(*store, 1);
    CHECK(source.read_bytes() == 90000);  // file 1's chunk is reused
    read_all(*store, 0);
    CHECK(source.read_bytes() == 90000 + 65536);  // chunk 0 of file 0 is read again
  }
  SECTION("reset: nothing is reused") {
    config.reset = true;
    source.Rescan();
    auto store = open();
    read_all(*store, 0);
    CHECK(source.read_bytes() == 90000 + 70000);
  }
}

}  // namespace
}  // namespace tierfs
