// The door load test's simulated world (door_load.cc runs it): MUNGE
// replaced by a fake whose checks take a set time on the door's side (as
// munged's round trip would) and are counted by whom they were for, the
// honest peers (each from an address of its own, 127.10.x.y, running the
// real client handshake, RunClientHandshake) and the flooder (from one
// address, 127.9.0.1, many connections at once, each sending a hello with
// a credential of another user, solving whatever puzzle it is asked).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/server/peer_door.h"

namespace tierfs::door_load {

using Clock = std::chrono::steady_clock;

inline constexpr uid_t kJobUid = 1000;  // the job's user, in the fake credentials
inline constexpr uid_t kOtherUid = 65534;
inline constexpr const char* kJob = "door-load";
inline constexpr const char* kDoorName = "door";
inline constexpr const char* kFlooderName = "mallory";
// The flooder's address; honest peer 0 shares it (another user's daemon on
// the flooder's node), from a reserved port when this runs as root.
inline constexpr uint32_t kFlooderAddress = 0x7f090001;  // 127.9.0.1

// What the fake MUNGE saw, shared by every thread.
struct World {
  explicit World(size_t peers)
      : sent_at(peers),
        pending(peers),
        check_wait_us(peers),
        flood_at_send(peers),
        flood_in_wait(peers) {}
  std::chrono::microseconds check_time{250};        // a check on the door's side
  std::atomic<int> honest_waiting{0};               // honest hellos made, not yet checked
  std::vector<std::atomic<int64_t>> sent_at;        // by peer: its hello's making, ns since epoch
  std::vector<std::atomic<int>> pending;            // by peer: its hello not checked yet
  std::vector<std::atomic<int64_t>> check_wait_us;  // by peer: hello made -> its check
  std::vector<std::atomic<uint64_t>>
      flood_at_send;                                // by peer: flood_checks when its hello was made
  std::vector<std::atomic<int64_t>> flood_in_wait;  // by peer: flood checks begun meanwhile
  std::atomic<uint64_t> honest_checks{0}, flood_checks{0};
  std::atomic<uint64_t> flood_checks_contended{0};  // while an honest hello waited
  const Clock::time_point epoch = Clock::now();
  int64_t Now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - epoch).count();
  }
  // An honest hello's wait ends: checked, or its attempt gave up.
  void Done(size_t peer);
};

// The fake MUNGE: `door` side checks take world->check_time and are
// counted; the peers' side is free.
std::unique_ptr<const Credentials> FakeMunge(World* world, bool door);
// An honest peer's identity ("p<index>"), the flooder's credential.
PeerIdentity PeerId(size_t index);
std::string FlooderHello();

// One honest peer's handshake(s), from `start`: the real client half,
// retried after 250 ms (doubling) until `give_up`.
struct HonestResult {
  bool ok = false;
  int attempts = 0;
  unsigned bits = 0;          // the most work a greeting asked of it
  double hashes = 0;          // expected hashes of the puzzles it solved
  int64_t to_session_us = 0;  // from its start to the door's session
  int64_t cpu_us = 0;         // its thread's CPU in the handshakes
  bool reserved = false;      // from a port below 1024
  std::string error;          // the last attempt's failure
  std::string first_error;    // the first attempt's, if it failed
};
HonestResult RunHonest(World* world, PeerDoor* door, uint16_t port, size_t index,
                       Clock::time_point start, Clock::time_point give_up);

// The flooder's side, in memory shared with the flooder's process (a
// process of its own, as on another node: its hashing must not contend
// with the door's and the peers' for libcrypto's locks or CPU).
struct FloodStats {
  std::atomic<uint64_t> connections{0}, hellos{0}, hashes{0};
  std::atomic<unsigned> bits{0};
  std::atomic<bool> stop{false};
};
// One of the flooder's threads: a connection at a time, until stats->stop.
void RunFlooder(FloodStats* stats, uint16_t port, const std::string& hello);

// The address honest peer `index` connects from (host order).
uint32_t HonestAddress(size_t index);

}  // namespace tierfs::door_load
