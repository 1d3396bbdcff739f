#include "tiering/peers/client/peer_liveness.h"

#include <algorithm>

namespace tierfs {

using std::chrono::microseconds;
using std::chrono::milliseconds;

void PeerLiveness::OnRoundTrip(microseconds sample) {
  if (srtt_.count() == 0) {
    srtt_ = sample;
    rttvar_ = sample / 2;
    return;
  }
  rttvar_ = (3 * rttvar_ + std::chrono::abs(srtt_ - sample)) / 4;
  srtt_ = (7 * srtt_ + sample) / 8;
}

milliseconds PeerLiveness::StallTime() const {
  const auto rtt =
      std::chrono::duration_cast<milliseconds>(std::max(8 * srtt_, srtt_ + 4 * rttvar_));
  const auto floor = std::max(kStallFloor, dead_after_ / 40);
  return std::clamp(rtt, floor, std::max(floor, dead_after_ / 4));
}

// A peer is stalled only once it answered nothing, not even a ping, for
// its stall time, which already allows eight of its round trips; a loaded
// but alive peer answers a ping from its progress thread well within twice
// that and is no longer stalled. One that does not is cut off or stopped:
// on the connection it had, TCP resends only after an exponential backoff
// (1.4, 3, 6.2 s ... into a cut), and every ping waits behind that; a
// fresh connection's SYNs reach it as soon as the link is back.
milliseconds PeerLiveness::SilenceBound() const {
  return std::min(std::max(kSilenceFloor, 2 * StallTime()), dead_after_ / 2);
}

}  // namespace tierfs
