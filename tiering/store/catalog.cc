#include "tiering/store/catalog.h"

#include <algorithm>

namespace tierfs {

Catalog::Catalog(const Namespace& ns, uint64_t chunk_size, uint64_t max_file_chunks)
    : ns_(ns), chunk_size_(chunk_size), first_(ns.size() + 1) {
  max_file_chunks = std::min<uint64_t>(max_file_chunks, UINT32_MAX);
  uint64_t total = 0;
  for (NodeId id = 0; id < ns.size(); ++id) {
    first_[id] = total;
    const Node& n = ns.node(id);
    if (!S_ISREG(n.mode)) continue;
    const uint64_t chunks = n.size / chunk_size + (n.size % chunk_size != 0);
    if (chunks > max_file_chunks) {
      ++untiered_files_;
    } else {
      total += chunks;
    }
  }
  first_[ns.size()] = total;
  states_.reset(new std::atomic<uint8_t>[total]);
  for (uint64_t i = 0; i < total; ++i) states_[i].store(kOnSource, std::memory_order_relaxed);
}

uint64_t Catalog::length(NodeId id, uint32_t c) const {
  uint64_t size = ns_.node(id).size;
  uint64_t start = static_cast<uint64_t>(c) * chunk_size_;
  return start >= size ? 0 : std::min(chunk_size_, size - start);
}

bool Catalog::TryBegin(ChunkKey k) {
  uint8_t expected = kOnSource;
  return At(k).compare_exchange_strong(expected, kInFlight, std::memory_order_acq_rel);
}

bool Catalog::Recover(ChunkKey k, int tier) {
  uint8_t expected = kOnSource;
  return At(k).compare_exchange_strong(expected, static_cast<uint8_t>(kResidentBase + tier),
                                       std::memory_order_acq_rel);
}

void Catalog::Publish(ChunkKey k, int tier) {
  At(k).store(static_cast<uint8_t>(kResidentBase + tier), std::memory_order_release);
}

void Catalog::Abort(ChunkKey k) { At(k).store(kOnSource, std::memory_order_release); }

bool Catalog::Evict(ChunkKey k, int tier) {
  uint8_t expected = static_cast<uint8_t>(kResidentBase + tier);
  return At(k).compare_exchange_strong(expected, kOnSource, std::memory_order_acq_rel);
}

std::vector<uint64_t> Catalog::ResidentChunksPerTier(int tiers) const {
  std::vector<uint64_t> out(static_cast<size_t>(tiers));
  for (uint64_t i = 0; i < first_.back(); ++i) {
    uint8_t s = states_[i].load(std::memory_order_relaxed);
    if (IsResident(s) && TierOf(s) < tiers) out[static_cast<size_t>(TierOf(s))]++;
  }
  return out;
}

uint64_t Catalog::FullyResidentFiles() const {
  uint64_t files = 0;
  for (NodeId id = 0; id < ns_.size(); ++id) {
    if (first_[id + 1] == first_[id]) continue;
    bool all = true;
    for (uint64_t i = first_[id]; i < first_[id + 1] && all; ++i) {
      all = IsResident(states_[i].load(std::memory_order_relaxed));
    }
    files += all;
  }
  return files;
}

}  // namespace tierfs
