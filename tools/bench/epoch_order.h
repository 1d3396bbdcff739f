// The shuffled order in which an epoch reads a dataset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bench {

// A permutation of 0..n-1 for `epoch`, fixed by (seed, epoch): the same
// arguments give the same order on every platform (own Fisher-Yates over
// splitmix64, no implementation-defined std distributions), and different
// epochs give different orders.
std::vector<size_t> EpochOrder(size_t n, uint64_t seed, unsigned epoch);

}  // namespace bench
