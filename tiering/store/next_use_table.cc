#include "tiering/store/next_use_table.h"

namespace tierfs {

struct NextUseTable::Entry {
  uint64_t next_pos = kNever, after_pos = kNever;
  uint64_t next_id = kNever;
  uint64_t reading_id = kNever;
  uint32_t reading_chunk = 0;  // the reader's chunk + 1; 0: no reader inside
  uint8_t next_slot = 0, after_slot = 0;
};

NextUseTable::NextUseTable(size_t nodes) : nodes_(nodes) {}

NextUseTable::~NextUseTable() { delete[] entries_.load(); }

NextUseTable::Entry* NextUseTable::EntriesForWrite() {
  std::call_once(allocate_, [this] { entries_.store(new Entry[nodes_]()); });
  return Entries();
}

void NextUseTable::Set(NodeId node, const Uses& uses) {
  if (node >= nodes_) return;
  Entry* entries = EntriesForWrite();
  MutexLock lock(StripeOf(node));
  Entry& e = entries[node];
  e.next_pos = uses.next.pos;
  e.next_slot = uses.next.slot;
  e.after_pos = uses.after.pos;
  e.after_slot = uses.after.slot;
  e.next_id = uses.next_id;
}

void NextUseTable::SetCursor(size_t slot, uint64_t cursor) {
  if (slot < kSlots) cursors_[slot].store(cursor, std::memory_order_relaxed);
}

void NextUseTable::SetReading(NodeId node, uint32_t chunk, uint64_t occurrence) {
  if (node >= nodes_) return;
  Entry* entries = EntriesForWrite();
  MutexLock lock(StripeOf(node));
  entries[node].reading_chunk = chunk + 1;
  entries[node].reading_id = occurrence;
}

void NextUseTable::ClearReading(NodeId node) {
  Entry* entries = Entries();
  if (entries == nullptr || node >= nodes_) return;
  MutexLock lock(StripeOf(node));
  entries[node].reading_chunk = 0;
  entries[node].reading_id = kNever;
}

uint64_t NextUseTable::Distance(uint64_t pos, uint8_t slot) const {
  if (pos == kNever || slot >= kSlots) return kNever;
  const uint64_t cursor = cursors_[slot].load(std::memory_order_relaxed);
  return pos > cursor ? pos - cursor : 0;  // a straggler behind its reader: needed now
}

NextUses NextUseTable::NextUse(ChunkKey key) const {
  const Entry* entries = Entries();
  if (!active_.load(std::memory_order_acquire) || entries == nullptr || key.node >= nodes_) {
    return NextUses{};
  }
  Entry e;
  {
    MutexLock lock(StripeOf(key.node));
    e = entries[key.node];
  }
  NextUses u;
  u.next = Distance(e.next_pos, e.next_slot);
  u.after = Distance(e.after_pos, e.after_slot);
  u.next_id = e.next_id;
  // The chunk before the reader's counts too: the kernel's read-ahead may
  // still be fetching its last pieces.
  if (e.reading_chunk != 0 && uint64_t{key.chunk} + 2 >= e.reading_chunk) {
    u.after = u.next;
    u.next = 0;
    u.next_id = e.reading_id;
  }
  return u;
}

}  // namespace tierfs
