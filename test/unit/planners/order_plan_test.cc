// OrderPlan: the declared read order, next-use lookups, consumption, bounds.
#include "prefetch/planners/order_plan.h"

#include <catch2/catch.hpp>

namespace tierfs {
namespace {

constexpr uint64_t kNever = OrderPlan::kNever;
// Node ids only index the plan's per-node arrays; no namespace is needed.
constexpr NodeId A = 1, B = 2, C = 3, D = 4, E = 5;

TEST_CASE("OrderPlan answers next and following use across epochs", "[order_plan]") {
  OrderPlan plan(8, 1000);
  CHECK(plan.size() == 0);
  CHECK(plan.NextUse(A) == kNever);
  CHECK(plan.FollowingUse(A) == kNever);
  // Epoch 1 at 0..3: A B C D; epoch 2 at 4..7: D C B A; epoch 3 at 8..10: B A E.
  CHECK(plan.Append({A, B, C, D}) == 4);
  CHECK(plan.Append({D, C, B, A}) == 4);
  CHECK(plan.Append({B, A, E}) == 3);
  REQUIRE(plan.size() == 11);
  CHECK(plan.at(0) == A);
  CHECK(plan.at(7) == A);
  CHECK(plan.at(10) == E);
  // A: 0, 7, 9.  B: 1, 6, 8.  C: 2, 5.  D: 3, 4.  E: 10.
  CHECK(plan.NextUse(A) == 0);
  CHECK(plan.FollowingUse(A) == 7);
  CHECK(plan.NextUse(B) == 1);
  CHECK(plan.FollowingUse(B) == 6);
  CHECK(plan.NextUse(C) == 2);
  CHECK(plan.FollowingUse(C) == 5);
  CHECK(plan.NextUse(D) == 3);
  CHECK(plan.FollowingUse(D) == 4);
  CHECK(plan.NextUse(E) == 10);
  CHECK(plan.FollowingUse(E) == kNever);
  CHECK(plan.NextUse(0) == kNever);  // never declared
  CHECK(plan.NextUse(7) == kNever);

  // Reading the first epoch in order walks each head forward.
  for (NodeId id : {A, B, C, D}) CHECK(plan.Consume(id));
  CHECK(plan.cursor() == 4);
  CHECK(plan.consumed() == 4);
  CHECK(plan.NextUse(A) == 7);
  CHECK(plan.FollowingUse(A) == 9);
  CHECK(plan.NextUse(B) == 6);
  CHECK(plan.FollowingUse(B) == 8);
  CHECK(plan.NextUse(C) == 5);
  CHECK(plan.FollowingUse(C) == kNever);
  CHECK(plan.NextUse(D) == 4);
  CHECK(plan.FollowingUse(D) == kNever);
  for (uint64_t p = 0; p < 4; ++p) CHECK_FALSE(plan.pending(p));
  for (uint64_t p = 4; p < 11; ++p) CHECK(plan.pending(p));

  // An epoch appended later links to the existing tails.
  CHECK(plan.Append({C, E}) == 2);  // 11, 12
  CHECK(plan.FollowingUse(C) == 11);
  CHECK(plan.NextUse(E) == 10);
  CHECK(plan.FollowingUse(E) == 12);
}

TEST_CASE("OrderPlan consumption out of order within an epoch", "[order_plan]") {
  OrderPlan plan(8, 1000);
  plan.Append({A, B, C, D, A, B, C, D});  // A: 0,4  B: 1,5  C: 2,6  D: 3,7
  // A loader with several workers reads C first, then A, then D, then B.
  CHECK(plan.Consume(C));
  CHECK(plan.cursor() == 3);  // the furthest consumed position + 1
  CHECK(plan.NextUse(C) == 6);
  CHECK(plan.FollowingUse(C) == kNever);
  CHECK(plan.pending(0));
  CHECK(plan.pending(1));
  CHECK_FALSE(plan.pending(2));
  CHECK(plan.Consume(A));
  CHECK(plan.cursor() == 3);  // A's position 0 is behind: the cursor does not go back
  CHECK(plan.NextUse(A) == 4);
  CHECK(plan.Consume(D));
  CHECK(plan.cursor() == 4);
  CHECK(plan.pending(1));  // B is a straggler behind the cursor
  CHECK(plan.NextUse(B) == 1);
  CHECK(plan.Consume(B));
  CHECK(plan.cursor() == 4);
  CHECK(plan.NextUse(B) == 5);
  CHECK(plan.consumed() == 4);
  // Second epoch: D read before the rest moves the cursor to its end.
  CHECK(plan.Consume(D));
  CHECK(plan.cursor() == 8);
  CHECK(plan.NextUse(D) == kNever);
  CHECK_FALSE(plan.Consume(D));  // all of D's occurrences consumed
  CHECK(plan.consumed() == 5);
  CHECK(plan.Consume(A));
  CHECK(plan.Consume(B));
  CHECK(plan.Consume(C));
  CHECK(plan.cursor() == 8);
  CHECK(plan.consumed() == 8);
  for (NodeId id : {A, B, C, D}) CHECK(plan.NextUse(id) == kNever);
  // A file read again once its occurrences are consumed and then declared
  // again is needed at its new position.
  CHECK(plan.Append({B}) == 1);
  CHECK(plan.NextUse(B) == 8);
  CHECK(plan.FollowingUse(B) == kNever);
}

TEST_CASE("OrderPlan Consume of an undeclared file is false and changes nothing", "[order_plan]") {
  OrderPlan plan(8, 1000);
  CHECK_FALSE(plan.Consume(A));  // empty plan
  plan.Append({A, B});
  CHECK_FALSE(plan.Consume(C));
  CHECK_FALSE(plan.Consume(1000));  // beyond the namespace
  CHECK(plan.cursor() == 0);
  CHECK(plan.consumed() == 0);
  CHECK(plan.NextUse(A) == 0);
  CHECK(plan.NextUse(1000) == kNever);
  CHECK(plan.FollowingUse(1000) == kNever);
}

TEST_CASE("OrderPlan holds at most max_entries and reports what fitted", "[order_plan]") {
  OrderPlan plan(8, 5);
  CHECK(plan.Append({A, B, C}) == 3);
  CHECK(plan.Append({D, E, A, B}) == 2);  // A and B are dropped
  CHECK(plan.size() == 5);
  CHECK(plan.FollowingUse(A) == kNever);
  CHECK(plan.NextUse(E) == 4);
  CHECK(plan.Append({A}) == 0);
  CHECK(plan.size() == 5);
  // The bound is on positions held: once every one is consumed they are
  // dropped (positions go on counting), so a long job's plan does not grow
  // by an epoch per epoch.
  for (NodeId id : {A, B, C, D}) CHECK(plan.Consume(id));
  CHECK(plan.Append({A}) == 0);  // E is still pending
  CHECK(plan.Consume(E));
  CHECK(plan.begin() == 5);
  CHECK(plan.Append({A, B}) == 2);
  CHECK(plan.NextUse(A) == 5);
  CHECK(plan.NextUse(B) == 6);
  CHECK(plan.at(6) == B);
  CHECK_FALSE(plan.pending(4));
}

TEST_CASE("OrderPlan StartEpoch abandons what was not read", "[order_plan]") {
  OrderPlan plan(8, 100);
  plan.Append({A, B, C, D});  // epoch 1, served by the page cache: only A is seen
  CHECK(plan.Consume(A));
  CHECK(plan.StartEpoch() == 3);
  CHECK(plan.consumed() == 1);  // abandoned is not read
  CHECK(plan.cursor() == 4);
  for (NodeId id : {A, B, C, D}) CHECK(plan.NextUse(id) == kNever);
  plan.Append({D, C, B, A});  // epoch 2 at 4..7
  CHECK(plan.NextUse(D) == 4);
  CHECK(plan.NextUse(A) == 7);
  CHECK(plan.outstanding() == 4);
  CHECK(plan.Consume(D));
  CHECK(plan.cursor() == 5);
}

TEST_CASE("OrderPlan Clear forgets the order, the cursor and the counts", "[order_plan]") {
  OrderPlan plan(8, 4);
  plan.Append({A, B, A, B});
  CHECK(plan.Consume(A));
  CHECK(plan.Consume(B));
  CHECK(plan.cursor() == 2);
  plan.Clear();
  CHECK(plan.size() == 0);
  CHECK(plan.cursor() == 0);
  CHECK(plan.consumed() == 0);
  CHECK(plan.NextUse(A) == kNever);
  CHECK(plan.NextUse(B) == kNever);
  CHECK_FALSE(plan.Consume(A));
  // The full budget is available again, and nothing links to the old order.
  CHECK(plan.Append({B, C, D, B}) == 4);
  CHECK(plan.NextUse(B) == 0);
  CHECK(plan.FollowingUse(B) == 3);
  CHECK(plan.NextUse(A) == kNever);
  CHECK(plan.Consume(B));
  CHECK(plan.cursor() == 1);
}

}  // namespace
}  // namespace tierfs
