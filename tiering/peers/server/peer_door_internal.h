// Internal to tierfs_peer_server: PeerDoor's connections (Conn) and hello
// checks (Checked), shared by peer_door.cc (listening, accepting) and
// peer_door_handshake.cc (answering the handshake's steps). Not for other
// libraries.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/server/peer_door.h"
#include "tiering/peers/transport/peer_crypto.h"

namespace tierfs {

// Hellos given to the checks' two threads at once: two being checked, two
// queued behind them so that neither waits for the door's thread. The
// others wait in their sources' queues (DoorSources), bounded by the places.
inline constexpr size_t kDoorChecksAtOnce = 4;

struct PeerDoor::Conn {
  int fd = -1;
  uint64_t id = 0;
  Source source;
  std::chrono::steady_clock::time_point deadline;
  // kWaiting: its hello waits in its source's queue for a check;
  // kChecking: given to the checks.
  enum State { kAwaitHello, kWaiting, kChecking, kAwaitBind } state = kAwaitHello;
  FrameReader reader;
  PeerNonce nonce{};
  unsigned bits = 0;          // the puzzle its greeting asked for
  bool resume_tried = false;  // one Resume per connection; a hello may follow its refusal
  std::string hello;          // kWaiting: the hello's credential
  std::string peer;           // kAwaitBind: the authenticated name
  SessionKeys keys;           // kAwaitBind
};

// A hello's check, done on the pool, for the door thread.
struct PeerDoor::Checked {
  int fd = -1;
  uint64_t conn = 0;
  HelloAnswer hello;  // the server's half of the handshake (peer_handshake.h)
};

// A fresh session id, never 0 (peer_door_resume.cc).
uint64_t RandomSessionId();

}  // namespace tierfs
