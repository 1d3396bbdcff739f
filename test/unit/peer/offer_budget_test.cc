// OfferBudget: offers in flight bounded in number and in bytes; a refused
// offer takes nothing; a finished one gives its share back.
#include "tiering/peers/client/offer_budget.h"

#include <catch2/catch.hpp>

namespace tierfs {
namespace {

TEST_CASE("offer budget: at most max_offers at once", "[peer]") {
  OfferBudget b(2, 1000);
  CHECK(b.TryTake(10));
  CHECK(b.TryTake(10));
  CHECK_FALSE(b.TryTake(10));
  CHECK(b.offers() == 2);
  CHECK(b.bytes() == 20);
  b.Give(10);
  CHECK(b.TryTake(10));
}

TEST_CASE("offer budget: at most max_bytes at once, the bound itself included", "[peer]") {
  OfferBudget b(16, 100);
  CHECK(b.TryTake(60));
  CHECK_FALSE(b.TryTake(41));  // 101 bytes: refused, nothing taken
  CHECK(b.offers() == 1);
  CHECK(b.bytes() == 60);
  CHECK(b.TryTake(40));  // exactly 100
  CHECK_FALSE(b.TryTake(1));
  b.Give(60);
  b.Give(40);
  CHECK(b.offers() == 0);
  CHECK(b.bytes() == 0);
  CHECK_FALSE(b.TryTake(101));  // larger than the whole budget: never
}

}  // namespace
}  // namespace tierfs
