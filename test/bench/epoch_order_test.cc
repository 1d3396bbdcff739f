// The loader's shuffle: every file exactly once per epoch, fixed by the seed,
// different across epochs and seeds, and not biased.
#include "epoch_order.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

using bench::EpochOrder;

TEST_CASE("an epoch order is a permutation", "[bench][shuffle]") {
  for (size_t n : {0, 1, 2, 7, 1000, 4099}) {
    std::vector<size_t> order = EpochOrder(n, 42, 3);
    REQUIRE(order.size() == n);
    std::sort(order.begin(), order.end());
    for (size_t i = 0; i < n; ++i) REQUIRE(order[i] == i);
  }
}

TEST_CASE("the order is fixed by seed and epoch", "[bench][shuffle]") {
  CHECK(EpochOrder(500, 1, 1) == EpochOrder(500, 1, 1));
  CHECK(EpochOrder(500, 1, 1) != EpochOrder(500, 1, 2));
  CHECK(EpochOrder(500, 1, 1) != EpochOrder(500, 2, 1));
  // Pinned so a silent change of the algorithm is noticed.
  CHECK(EpochOrder(8, 1, 1) == std::vector<size_t>{7, 5, 1, 0, 4, 6, 3, 2});
  const std::vector<size_t> a = EpochOrder(100, 7, 1);
  const std::vector<size_t> b = EpochOrder(100, 7, 2);
  size_t same_position = 0;
  for (size_t i = 0; i < a.size(); ++i) same_position += a[i] == b[i];
  CHECK(same_position < 10);  // about 1 expected for independent permutations
}

TEST_CASE("every position is equally likely", "[bench][shuffle]") {
  // Where does element 0 land among 10 positions over 20000 shuffles?
  // Expected 2000 per position, sd ~42; +-250 is ~6 sd.
  std::vector<int> landed(10, 0);
  for (unsigned epoch = 0; epoch < 20000; ++epoch) {
    const std::vector<size_t> order = EpochOrder(10, 99, epoch);
    landed[std::find(order.begin(), order.end(), size_t{0}) - order.begin()]++;
  }
  for (int count : landed) CHECK(count == Approx(2000).margin(250));
}
