// ReadsByUid: each reader's own data reads and bytes, by the caller's uid,
// for the "you" group of .tierfs/stats (a user sees her own figures, never
// another's). Bounded: the first kMaxUids uids seen get a row each; reads
// of any uid after them are added up in one shared "other" row, counted.
//
// Cheap on the read path: no lock and no allocation. A read probes a fixed
// open-addressed table (at most half full: one slot, usually) and adds to
// two relaxed atomics. Rows are never removed, so a uid's row, once made,
// stays where it is. Thread-safe.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tiering/base/counter_visitor.h"

namespace tierfs {

class ReadsByUid {
 public:
  static constexpr size_t kMaxUids = 1024;

  struct UidReads {
    uint64_t reads = 0;
    uint64_t bytes = 0;
    bool own_row = false;  // false: the uid has no row (its reads are in other())
  };

  // One read by `uid` that returned `bytes`. Makes the uid's row if it has
  // none and one is left; else the read goes to the "other" row.
  void Add(uid_t uid, uint64_t bytes);
  // What `uid` read so far (zero and own_row false: none of its reads had a row).
  UidReads Of(uid_t uid) const;
  // The reads of uids that found no row left.
  UidReads Other() const;
  // Uids with a row of their own (at most kMaxUids).
  size_t uids() const { return rows_.load(std::memory_order_relaxed); }

  // The table's size and the "other" row, without naming any uid (every
  // user may read the stats).
  void VisitCounters(CounterVisitor& v) const;

 private:
  static constexpr size_t kSlots = 2 * kMaxUids;  // a power of two, at most half full
  static constexpr uint32_t kEmpty = UINT32_MAX;  // (uid_t)-1 is nobody: it goes to other
  struct Slot {
    std::atomic<uint32_t> uid{kEmpty};
    std::atomic<uint64_t> reads{0}, bytes{0};
  };
  static size_t Home(uint32_t uid);
  // `uid`'s slot; with `make`, claims an empty one if a row is left.
  // nullptr: no row.
  Slot* Find(uint32_t uid, bool make);
  const Slot* Find(uint32_t uid) const { return const_cast<ReadsByUid*>(this)->Find(uid, false); }

  std::array<Slot, kSlots> slots_;
  std::atomic<size_t> rows_{0};  // rows claimed (reserved before the slot is taken)
  Slot other_;
};

}  // namespace tierfs
