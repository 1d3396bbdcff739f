#include "epoch_order.h"

#include <numeric>
#include <utility>

namespace bench {
namespace {

// splitmix64: a small, well-mixed, portable generator.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) without modulo bias (rejection sampling).
  uint64_t Below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do x = Next();
    while (x >= limit);
    return x % bound;
  }

 private:
  uint64_t state_;
};

}  // namespace

std::vector<size_t> EpochOrder(size_t n, uint64_t seed, unsigned epoch) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  SplitMix64 rng(seed * 0x100000001b3ull ^
                 (static_cast<uint64_t>(epoch) + 1) * 0x9e3779b97f4a7c15ull);
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  return order;
}

}  // namespace bench
