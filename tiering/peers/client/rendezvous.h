// Rendezvous (highest random weight) hashing: the home node of a chunk is
// the live peer with the highest weight(chunk, peer). Every node computes
// the same home from the same live set, with no coordination; when a peer
// goes down only the chunks homed on it move (each to its second choice),
// and they move back when it returns. The weights are part of the wire
// contract: nodes of one job must compute them alike (XXH64, seed 0).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tierfs {

// The key of chunk `chunk` of the file at `path` (relative to SOURCE).
uint64_t ChunkHash(std::string_view path, uint32_t chunk);

class Rendezvous {
 public:
  // The job's peers by name (this node among them); their order does not
  // matter to the result.
  explicit Rendezvous(std::vector<std::string> names);

  size_t size() const { return names_.size(); }
  const std::string& name(size_t i) const { return names_[i]; }
  // The index of `name`, or -1.
  int Find(std::string_view name) const;

  // The peer with the highest weight for `key` among those for which
  // live(index) is true; -1 if none is live.
  template <typename IsLive>
  int Home(uint64_t key, IsLive&& live) const {
    int best = -1;
    uint64_t best_weight = 0;
    for (size_t i = 0; i < names_.size(); ++i) {
      if (!live(i)) continue;
      uint64_t w = Weight(key, i);
      // Ties (2^-64) go to the smaller name hash, so the list's order never matters.
      if (best < 0 || w > best_weight || (w == best_weight && hashes_[i] < hashes_[best])) {
        best = static_cast<int>(i);
        best_weight = w;
      }
    }
    return best;
  }
  // Over all peers.
  int Home(uint64_t key) const {
    return Home(key, [](size_t) { return true; });
  }

  uint64_t Weight(uint64_t key, size_t peer) const;

 private:
  std::vector<std::string> names_;
  std::vector<uint64_t> hashes_;  // XXH64 of each name
};

}  // namespace tierfs
