// In-flight chunks, for readers that want their first bytes early: a chunk
// being promoted (8 MiB by default) is written piece by piece, and a reader
// that needs only its first piece need not wait for the whole copy. The
// writer reports its progress here; a reader waits until its range is
// written, or the chunk is done (published or given up), or its deadline.
//
// This table is the one way to wait for a chunk's transition: a claim lists
// its entry before the catalog says "in flight" and removes it only after
// the catalog says where the chunk went, so a reader that saw "in flight"
// either finds the entry and waits on it, or finds none and looks at the
// catalog again.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "tiering/base/mutex.h"
#include "tiering/store/tier.h"

namespace tierfs {

class InFlight {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // The writer appended bytes; its total is now `written`. `data` (with
  // `hold`) is where they can be read, or null if the tier cannot serve
  // them before the chunk is published.
  void Progress(uint64_t written, const char* data, std::shared_ptr<const void> hold);
  // Published or given up: waiters look at the catalog again.
  void Finish();

  // Waits until [off, off+n) is written and readable: 0 with the bytes in
  // *out; -EAGAIN when the chunk was finished first; -ETIMEDOUT at `deadline`.
  int Read(uint64_t off, size_t n, Deadline deadline, TierRead* out);

 private:
  Mutex mu_;  // guards the rest. Lock order: a leaf.
  CondVar cv_;
  uint64_t written_ GUARDED_BY(mu_) = 0;
  bool done_ GUARDED_BY(mu_) = false;
  const char* data_ GUARDED_BY(mu_) = nullptr;
  std::shared_ptr<const void> hold_ GUARDED_BY(mu_);
};

// The in-flight chunks by key. Thread-safe.
class InFlightTable {
 public:
  InFlightTable() : stripes_(new Stripe[kStripes]) {}
  // A new entry for `key`; null if it has one (another claim holds it).
  std::shared_ptr<InFlight> TryAdd(ChunkKey key);
  std::shared_ptr<InFlight> Find(ChunkKey key) const;
  void Remove(ChunkKey key);

 private:
  static constexpr size_t kStripes = 64;
  struct Stripe {
    mutable Mutex mu;  // guards chunks. Lock order: a leaf.
    std::unordered_map<ChunkKey, std::shared_ptr<InFlight>, ChunkKeyHash> chunks GUARDED_BY(mu);
  };
  Stripe& StripeOf(ChunkKey key) const { return stripes_[ChunkKeyHash()(key) % kStripes]; }
  std::unique_ptr<Stripe[]> stripes_;
};

}  // namespace tierfs
