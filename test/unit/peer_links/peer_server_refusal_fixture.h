// The fixture of the tests that play an attacker against PeerServer:
// server "b" with an honest client "a" of it (Setup), a plain TCP
// connection to its door (Dial), a hello credential made by any identity
// (HelloCred). Shared by peer_server_refusal_test.cc (hellos refused),
// peer_server_flood_test.cc (floods of hellos and of idle connections) and
// peer_server_message_test.cc (messages after an honest handshake).
#pragma once

#include <sys/socket.h>
#include <sys/time.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "munge_daemon.h"
#include "peer_fixture.h"
#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/server/peer_server.h"
#include "tiering/peers/transport/peer_crypto.h"

namespace tierfs::testing {

using Clock = std::chrono::steady_clock;

inline constexpr uint64_t kChunk = 1 << 20;

// Server "b" and an honest client "a" of it.
struct Setup {
  explicit Setup(PeerServerOptions options = {}, uint64_t chunk = kChunk) : provider(chunk) {
    provider.Add("f", 3 * kChunk);
    b = std::make_unique<TestNode>("b", &provider, chunk, 0, options);
    b->StartServer();
    a = std::make_unique<TestNode>("a", &provider, chunk);
    a->StartClient({b->address()});
    REQUIRE(Within(5s, [&] { return a->client().up(0); }));
  }
  // The honest peer still gets its bytes.
  void HonestFetchWorks() {
    std::vector<char> buf(kChunk);
    CHECK(a->client().Fetch(0, Ref("f", 3 * kChunk, 1, kChunk), buf.data(), Clock::now() + 5s) ==
          static_cast<ssize_t>(kChunk));
    CHECK(IsPattern("f", kChunk, buf.data(), kChunk));
  }
  const PeerServerCounters& counters() { return b->server().counters(); }
  const PeerDoorCounters& door() { return b->server().door(); }

  PatternProvider provider;
  std::unique_ptr<TestNode> b, a;
};

// A plain TCP connection to the door on `port`, with a 5 s receive timeout.
inline int Dial(uint16_t port) {
  int fd = DialLoopback(port);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// A hello credential for "b" from `as`, answering greeting `echo`.
inline std::string HelloCred(PeerAuth& as, const PeerNonce& echo, const std::string& to = "b") {
  PeerKeyPair keys;
  REQUIRE(NewPeerKeyPair(&keys));
  PeerClaim c{PeerClaim::kHello, RandomNonce(), echo, keys.pub, as.self().job, as.self().name, to};
  Result<std::string> cred = as.Make(c);
  REQUIRE(cred.ok());
  return *cred;
}

}  // namespace tierfs::testing
