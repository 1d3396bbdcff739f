// NextUseTable: when each file is needed next, as the declared read orders
// say: what clairvoyant (Belady) eviction runs on. The prefetch planner
// writes it whenever a file's declared uses change, and each stream's
// cursor as its reader advances; the next-use policy reads it. The data is
// pushed down into the store: nothing in tiering asks the planner.
//
// A use is a position in a stream (a declared order, by slot): its
// distance is position - cursor[slot], the stream's reads still to come, so
// uses count down as readers advance without the planner rewriting every
// file. Where several streams declare one file, the planner writes the
// nearest use when the file's uses change; streams advance in step in a
// data-parallel job, so it stays the nearest.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include "tiering/base/mutex.h"
#include "tiering/namespace/chunk_key.h"

namespace tierfs {

// When a chunk is needed, in reads still to come before it (comparable
// across declared orders); kNever when there is no such use.
struct NextUses {
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
  uint64_t next = kNever;   // the coming use
  uint64_t after = kNever;  // the use after that one
  // Names the coming use's occurrence (it stays the same while that use is
  // to come, though `next` may count down): kNever for none.
  uint64_t next_id = kNever;
};

// Thread-safe. Its locks are leaves: nothing is called while one is held.
class NextUseTable {
 public:
  static constexpr size_t kSlots = 64;  // streams at once
  static constexpr uint64_t kNever = NextUses::kNever;

  struct Use {
    uint64_t pos = kNever;  // position in its stream; kNever: no use
    uint8_t slot = 0;       // the stream's slot
  };
  struct Uses {
    Use next, after;            // the coming use and the one after it
    uint64_t next_id = kNever;  // names the coming use's occurrence
  };

  // `nodes`: the namespace size. Memory (about 40 bytes per file) is taken
  // at the first Set: a mount that declares no order pays nothing.
  explicit NextUseTable(size_t nodes);
  ~NextUseTable();

  // Declared uses are answered only while active (order mode); otherwise
  // every use is "never" and the policy evicts nothing.
  void SetActive(bool active) { active_.store(active, std::memory_order_release); }
  // File `node`'s declared uses (all kNever: none).
  void Set(NodeId node, const Uses& uses);
  // Stream `slot`'s reader has consumed the positions before `cursor`.
  void SetCursor(size_t slot, uint64_t cursor);
  // A reader is in chunk `chunk` of `node` (a file of several chunks), on
  // its occurrence `occurrence`: the chunks from the one before `chunk` on
  // are needed now, though the occurrence was consumed at offset 0.
  void SetReading(NodeId node, uint32_t chunk, uint64_t occurrence);
  void ClearReading(NodeId node);

  NextUses NextUse(ChunkKey key) const;

 private:
  struct Entry;
  static constexpr size_t kStripes = 64;
  // The entries, allocated by the first writer; null before.
  Entry* Entries() const { return entries_.load(std::memory_order_acquire); }
  Entry* EntriesForWrite();
  Mutex& StripeOf(NodeId node) const { return stripes_[node % kStripes]; }
  uint64_t Distance(uint64_t pos, uint8_t slot) const;

  const size_t nodes_;
  std::atomic<bool> active_{false};
  std::once_flag allocate_;
  std::atomic<Entry*> entries_{nullptr};  // owned; nodes_ of them
  std::array<std::atomic<uint64_t>, kSlots> cursors_{};
  // Stripe i guards the entries of nodes n with n % kStripes == i. Leaves.
  mutable std::array<Mutex, kStripes> stripes_;
};

}  // namespace tierfs
