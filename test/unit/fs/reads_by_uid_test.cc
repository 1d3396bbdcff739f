// ReadsByUid: each reader's reads by uid, bounded, exact under threads.
#include "fs/fuse/reads_by_uid.h"

#include <catch2/catch.hpp>
#include <memory>
#include <thread>
#include <vector>

namespace tierfs {
namespace {

TEST_CASE("ReadsByUid keeps each uid's reads and bytes apart", "[reads_by_uid]") {
  ReadsByUid t;
  t.Add(0, 100);
  t.Add(1000, 10);
  t.Add(1000, 20);
  CHECK(t.Of(0).reads == 1);
  CHECK(t.Of(0).bytes == 100);
  CHECK(t.Of(1000).reads == 2);
  CHECK(t.Of(1000).bytes == 30);
  CHECK(t.Of(1000).own_row);
  CHECK_FALSE(t.Of(1001).own_row);  // never read: no row, nothing
  CHECK(t.Of(1001).reads == 0);
  CHECK(t.uids() == 2);
  CHECK(t.Other().reads == 0);
}

TEST_CASE("ReadsByUid: the 1025th uid goes to the other row", "[reads_by_uid]") {
  auto t = std::make_unique<ReadsByUid>();
  for (uid_t u = 0; u < ReadsByUid::kMaxUids; ++u) t->Add(5000 + u * 7, 1);
  CHECK(t->uids() == ReadsByUid::kMaxUids);
  t->Add(999999, 4096);  // the 1025th
  t->Add(999999, 4096);
  t->Add(888888, 1);  // the 1026th
  CHECK(t->uids() == ReadsByUid::kMaxUids);
  CHECK_FALSE(t->Of(999999).own_row);
  CHECK(t->Of(999999).reads == 0);
  CHECK(t->Other().reads == 3);
  CHECK(t->Other().bytes == 8193);
  t->Add(5000, 9);  // the first ones keep their rows
  CHECK(t->Of(5000).reads == 2);
  CHECK(t->Of(5000).bytes == 10);
  CHECK(t->Of(5000 + 1023 * 7).reads == 1);
  t->Add(static_cast<uid_t>(-1), 1);  // nobody's uid: other
  CHECK(t->Other().reads == 4);
}

TEST_CASE("ReadsByUid: concurrent reads by many uids add up exactly", "[reads_by_uid]") {
  auto t = std::make_unique<ReadsByUid>();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  constexpr uid_t kUids = 1200;  // more than fit: rows are raced for, the rest is other
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&t, th] {
      for (int i = 0; i < kPerThread; ++i) {
        t->Add(static_cast<uid_t>((i * 7 + th) % kUids), 3);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(t->uids() == ReadsByUid::kMaxUids);
  uint64_t reads = t->Other().reads, bytes = t->Other().bytes;
  size_t rows = 0;
  for (uid_t u = 0; u < kUids; ++u) {
    const ReadsByUid::UidReads f = t->Of(u);
    rows += f.own_row;
    reads += f.reads;
    bytes += f.bytes;
  }
  CHECK(rows == ReadsByUid::kMaxUids);  // no uid has two rows, none is lost
  CHECK(reads == uint64_t{kThreads} * kPerThread);
  CHECK(bytes == 3 * uint64_t{kThreads} * kPerThread);
}

TEST_CASE("ReadsByUid: threads of one uid share one row", "[reads_by_uid]") {
  ReadsByUid t;
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&t] {
      for (int i = 0; i < 10000; ++i) t.Add(1000, 2);
    });
  }
  for (auto& th : threads) th.join();
  CHECK(t.uids() == 1);
  CHECK(t.Of(1000).reads == 40000);
  CHECK(t.Of(1000).bytes == 80000);
}

}  // namespace
}  // namespace tierfs
