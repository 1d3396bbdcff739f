// DoorSources, the door's bookkeeping per source: the puzzle a source is
// asked for follows its own recent connections (a real peer's one or two
// cost nothing, a flood's cost more the longer it goes on, and it is
// forgotten once it stops), and the checks are given out one per source in
// turn, the reserved ports' class three turns to the other's one.
#include "tiering/peers/server/peer_door_sources.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <map>

namespace tierfs {
namespace {

using Clock = DoorSources::Clock;
using namespace std::chrono_literals;

DoorSources::Source From(uint32_t address, bool reserved = false) {
  return DoorSources::Source{address, reserved};
}

TEST_CASE("door sources: a source's puzzle follows its own connections", "[peer]") {
  DoorSources s(DoorSources::Options{8, 64, 18});
  const auto t0 = Clock::now();
  // 1,023 peers, each connecting once within a second: none is asked for work.
  for (uint32_t a = 1; a <= 1023; ++a) {
    CHECK(s.Arrived(From(a), t0 + std::chrono::microseconds(a * 977)) == 0);
  }
  // A peer that reconnects a few times is not asked either.
  for (int i = 0; i < 7; ++i) CHECK(s.Arrived(From(7), t0 + 1s) == 0);
  // A flood from one address, 5,000 connections a second: its greetings
  // ask for 8 bits after a few, then for the most.
  unsigned bits = 0, first_asked = 0, starts = 0;
  for (int i = 0; i < 5000; ++i) {
    bool started = false;
    bits = s.Arrived(From(5000), t0 + std::chrono::microseconds(200 * i), &started);
    if (bits > 0 && first_asked == 0) first_asked = static_cast<unsigned>(i) + 1;
    starts += started;
  }
  CHECK(first_asked == 9);
  CHECK(starts == 1);  // said once (the door logs it)
  CHECK(bits == 18);
  // Meanwhile another address, and the flooder's own address from a
  // reserved port, are asked for nothing.
  CHECK(s.Arrived(From(5001), t0 + 1s) == 0);
  CHECK(s.Arrived(From(5000, true), t0 + 1s) == 0);
  // The most any source is asked for, then calm: forgotten after some seconds.
  CHECK(s.Prune(t0 + 1s) == 18);
  CHECK(s.Prune(t0 + 10s) < 18);
  CHECK(s.Prune(t0 + 30s) == 0);
  CHECK(s.size() == 0);
  // Between: 2 more bits each time the count doubles.
  CHECK(s.BitsFor(8) == 0);
  CHECK(s.BitsFor(9) == 8);
  CHECK(s.BitsFor(16) == 8);
  CHECK(s.BitsFor(17) == 10);
  CHECK(s.BitsFor(33) == 12);
  CHECK(s.BitsFor(1e9) == 18);
}

TEST_CASE("door sources: however long a flood, its address is asked less soon after it ends",
          "[peer]") {
  DoorSources s(DoorSources::Options{8, 64, 18});
  const auto t0 = Clock::now();
  // 100,000 connections in 10 s (a fast host's flood): the most work throughout.
  unsigned bits = 0;
  for (int i = 0; i < 100000; ++i) {
    bits = s.Arrived(From(9), t0 + std::chrono::microseconds(100 * i));
  }
  CHECK(bits == 18);
  CHECK(s.Prune(t0 + 10s) == 18);
  // Its count stopped at twice the most work's: less within 1.5 s of the
  // end, not after the eight halvings 100,000 connections would take.
  CHECK(s.Prune(t0 + 11500ms) < 18);
  CHECK(s.Arrived(From(9), t0 + 11500ms) < 18);
}

TEST_CASE("door sources: the checks go to each source in turn, reserved ports three turns to one",
          "[peer]") {
  DoorSources s(DoorSources::Options{8, 64, 18});
  uint64_t conn = 0;
  // The flooder has 8 hellos waiting before anyone else's arrive.
  for (int i = 0; i < 8; ++i) s.Wait(From(99), {100, ++conn});
  s.Wait(From(1), {1, ++conn});
  s.Wait(From(2), {2, ++conn});
  for (int i = 0; i < 4; ++i) s.Wait(From(10 + i, true), {10 + i, ++conn});
  s.Wait(From(99, true), {4, ++conn});  // the flooder's node's root daemon
  std::vector<int> order;
  DoorSources::HelloTicket t;
  bool reserved = false;
  std::map<int, int> reserved_of;
  while (s.Next(&t, &reserved)) {
    order.push_back(t.fd);
    reserved_of[t.fd] = reserved;
  }
  // While both classes wait, three reserved turns to one of the others; in
  // a class, one hello per source a turn.
  REQUIRE(order.size() == 15);
  CHECK(order == std::vector<int>{10, 11, 12, 100, 13, 4, 1, 2, 100, 100, 100, 100, 100, 100, 100});
  CHECK(reserved_of[10] == 1);
  CHECK(reserved_of[4] == 1);
  CHECK(reserved_of[100] == 0);
  CHECK(s.waiting() == 0);
}

TEST_CASE("door sources: places per source and class, and a closed hello leaves its queue",
          "[peer]") {
  DoorSources s(DoorSources::Options{2, 3, 18});
  s.Hold(From(1));
  CHECK_FALSE(s.SourceFull(From(1)));
  s.Hold(From(1));
  CHECK(s.SourceFull(From(1)));
  CHECK_FALSE(s.SourceFull(From(1, true)));  // a class of its own
  s.Hold(From(2));
  CHECK(s.ClassFull(false));
  CHECK(s.Heaviest(false).address == 1);  // whose connection makes room
  CHECK(s.Heaviest(true).address == 0);   // none
  CHECK_FALSE(s.ClassFull(true));
  s.Release(From(1));
  CHECK_FALSE(s.SourceFull(From(1)));
  CHECK_FALSE(s.ClassFull(false));

  s.Wait(From(1), {10, 1});
  s.Wait(From(1), {11, 2});
  s.Forget(From(1), 1);
  DoorSources::HelloTicket t;
  bool reserved = true;
  REQUIRE(s.Next(&t, &reserved));
  CHECK(t.conn == 2);
  CHECK_FALSE(reserved);
  CHECK_FALSE(s.Next(&t, &reserved));
  s.Release(From(1));
  s.Release(From(2));
  s.Release(From(2));  // one too many: ignored
  CHECK(s.Prune(Clock::now() + 60s) == 0);
  CHECK(s.size() == 0);
}

}  // namespace
}  // namespace tierfs
