#pragma once
// A chunk of a file of the namespace: what tiers store, the catalog tracks
// and peers ask each other for.
#include <cstddef>
#include <cstdint>
#include <functional>

#include "tiering/namespace/namespace.h"

namespace tierfs {

struct ChunkKey {
  NodeId node = 0;
  uint32_t chunk = 0;
  bool operator==(const ChunkKey&) const = default;
};

struct ChunkKeyHash {
  size_t operator()(const ChunkKey& k) const {
    return std::hash<uint64_t>()((static_cast<uint64_t>(k.node) << 32) | k.chunk);
  }
};

}  // namespace tierfs
