// PeerLiveness: the round trip smoothed as TCP does, and the stall time
// and silence bound PeerClient derives from it, within their floors and
// ceilings.
#include "tiering/peers/client/peer_liveness.h"

#include <catch2/catch.hpp>
#include <chrono>

namespace tierfs {
namespace {

using namespace std::chrono_literals;
using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST_CASE("peer liveness: no round trip measured: the floors", "[peer]") {
  PeerLiveness l(10s);
  CHECK(l.srtt() == 0us);
  CHECK(l.StallTime() == 250ms);                   // max(250 ms, 10 s / 40)
  CHECK(l.SilenceBound() == 1000ms);               // max(1 s, twice the stall time)
  CHECK(PeerLiveness(60s).StallTime() == 1500ms);  // dead_after / 40 above 250 ms
}

TEST_CASE("peer liveness: round trips smoothed as RFC 6298 does", "[peer]") {
  PeerLiveness l(10s);
  l.OnRoundTrip(100ms);  // the first: mean, and half of it as deviation
  CHECK(l.srtt() == 100ms);
  CHECK(l.rttvar() == 50ms);
  CHECK(l.StallTime() == 800ms);  // eight round trips
  CHECK(l.SilenceBound() == 1600ms);
  // The deviation moves by a quarter of |mean - sample| against the old
  // mean, then the mean by an eighth.
  l.OnRoundTrip(200ms);
  CHECK(l.rttvar() == microseconds(62500));  // (3 * 50 + 100) / 4
  CHECK(l.srtt() == microseconds(112500));   // (7 * 100 + 200) / 8
  CHECK(l.StallTime() == 900ms);             // 8 * 112.5 ms
}

TEST_CASE("peer liveness: a jittery peer gets its deviations, not eight round trips", "[peer]") {
  PeerLiveness l(10s);
  l.OnRoundTrip(10ms);
  l.OnRoundTrip(1000ms);
  // srtt 133.75 ms, rttvar 251.25 ms: srtt + 4 rttvar = 1138.75 ms > 8 srtt.
  CHECK(l.srtt() == microseconds(133750));
  CHECK(l.rttvar() == microseconds(251250));
  CHECK(l.StallTime() == 1138ms);
  CHECK(l.SilenceBound() == 2276ms);
}

TEST_CASE("peer liveness: a slow peer's times stop at dead_after's fractions", "[peer]") {
  PeerLiveness l(10s);
  for (int i = 0; i < 4; ++i) l.OnRoundTrip(1s);
  CHECK(l.StallTime() == 2500ms);     // dead_after / 4
  CHECK(l.SilenceBound() == 5000ms);  // dead_after / 2
  // A short dead_after: the floor wins over the stall ceiling, and the
  // silence bound stays below dead_after.
  PeerLiveness quick(400ms);
  quick.OnRoundTrip(1s);
  CHECK(quick.StallTime() == 250ms);
  CHECK(quick.SilenceBound() == 200ms);
}

}  // namespace
}  // namespace tierfs
