// Internal to tierfs_peer_server: what peer_server.cc (the sessions) and
// peer_server_answer.cc (the answering of requests and offers) both need.
// Not for other libraries.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "tiering/peers/server/peer_server.h"

namespace tierfs {
namespace peer_server_internal {

using Clock = std::chrono::steady_clock;

// What seals this server's messages to one peer: shared by the progress
// thread and the pool threads that seal data answers.
struct SessionCrypto {
  SessionKeys keys;
  std::atomic<uint64_t> next_seq{2};  // 1 was the handshake's
};

}  // namespace peer_server_internal

struct PeerServer::Connection {
  uint64_t session = 0;
  // The endpoint the transport made for the peer's (its messages' reply
  // endpoint), the transport's to keep: closing one the peer still uses
  // would break its side. Null once its watch ended (PeerTransport::Watch):
  // it may be freed, nothing is sent on it again, and the session is
  // dropped at the next tick.
  PeerEndpoint ep = nullptr;
  peer_server_internal::Clock::time_point last_seen = peer_server_internal::Clock::now();
  std::string peer;  // the authenticated name
  std::shared_ptr<peer_server_internal::SessionCrypto> crypto;
  ReplayWindow window;   // of the peer's sequence numbers
  size_t in_flight = 0;  // requests of this connection in the server
  uint64_t bytes = 0;    // ... and their bytes
  std::unordered_map<uint64_t, peer_server_internal::Clock::time_point>
      sending;  // data answers by request id
};

}  // namespace tierfs
