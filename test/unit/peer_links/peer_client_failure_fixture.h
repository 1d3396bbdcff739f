// What the tests of PeerClient against failing servers share: the chunk
// they fetch (the default size: a rendezvous transfer) and the time since a
// moment. Shared by peer_client_failure_test.cc (slow, stalled, dead and
// late servers) and peer_client_hostile_test.cc (servers played by the test
// that break the protocol, forge answers or cannot prove themselves).
#pragma once

#include <chrono>
#include <cstdint>

#include "peer_fixture.h"

namespace tierfs::testing {

using Clock = std::chrono::steady_clock;

inline constexpr uint64_t kChunk = 8 << 20;  // the default chunk: a rendezvous transfer
inline const ChunkRef kRef = Ref("f", 3 * kChunk, 1, kChunk);

inline std::chrono::milliseconds Since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

}  // namespace tierfs::testing
