#include "fs/fuse/reads_by_uid.h"

namespace tierfs {

size_t ReadsByUid::Home(uint32_t uid) {
  // Fibonacci hashing: consecutive uids (a site's users) spread over the table.
  constexpr int kBits = 11;
  static_assert(size_t{1} << kBits == kSlots);
  return static_cast<size_t>((uint64_t{uid} * 0x9E3779B97F4A7C15ull) >> (64 - kBits));
}

ReadsByUid::Slot* ReadsByUid::Find(uint32_t uid, bool make) {
  if (uid == kEmpty) return nullptr;
  bool reserved = false;  // a row of the kMaxUids is ours to take
  size_t i = Home(uid);
  // At most kMaxUids of kSlots slots are taken: an empty one is always found.
  for (size_t probe = 0; probe < kSlots; ++probe, i = (i + 1) & (kSlots - 1)) {
    uint32_t seen = slots_[i].uid.load(std::memory_order_acquire);
    if (seen == uid) return &slots_[i];
    if (seen != kEmpty) continue;
    if (!make) return nullptr;  // rows are never removed: the uid has none
    if (!reserved) {
      size_t n = rows_.load(std::memory_order_relaxed);
      do {
        if (n >= kMaxUids) return nullptr;
      } while (!rows_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
      reserved = true;
    }
    if (slots_[i].uid.compare_exchange_strong(seen, uid, std::memory_order_acq_rel)) {
      return &slots_[i];
    }
    if (seen == uid) {  // another reader of the same uid made the row first
      rows_.fetch_sub(1, std::memory_order_relaxed);
      return &slots_[i];
    }
    // Another uid took this slot: probe on, the reservation kept.
  }
  if (reserved) rows_.fetch_sub(1, std::memory_order_relaxed);  // unreachable: never full
  return nullptr;
}

void ReadsByUid::Add(uid_t uid, uint64_t bytes) {
  Slot* s = Find(static_cast<uint32_t>(uid), true);
  if (s == nullptr) s = &other_;
  s->reads.fetch_add(1, std::memory_order_relaxed);
  s->bytes.fetch_add(bytes, std::memory_order_relaxed);
}

ReadsByUid::UidReads ReadsByUid::Of(uid_t uid) const {
  const Slot* s = Find(static_cast<uint32_t>(uid));
  if (s == nullptr) return {};
  return {s->reads.load(std::memory_order_relaxed), s->bytes.load(std::memory_order_relaxed), true};
}

ReadsByUid::UidReads ReadsByUid::Other() const {
  return {other_.reads.load(std::memory_order_relaxed),
          other_.bytes.load(std::memory_order_relaxed), false};
}

void ReadsByUid::VisitCounters(CounterVisitor& v) const {
  v.Gauge("reader_uids", static_cast<double>(uids()),
          {"Users whose data reads are counted apart, a table entry each (at most 1024).",
           Unit::kEntries, "reader_uids"});
  const UidReads other = Other();
  v.Counter("other_uid_reads", other.reads,
            {"Data reads by users beyond the first 1024, counted together."});
  v.Counter("other_uid_read_bytes", other.bytes,
            {"Bytes of data reads by users beyond the first 1024.", Unit::kBytes});
}

}  // namespace tierfs
