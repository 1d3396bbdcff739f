// JobPeersConfig: the job's peers as the mount's options give them (-o
// peers=, peer_*=): who they are, how long to wait for them, where to
// connect from. A leaf: the option parser and its fuzz target read it
// without UCX, MUNGE or libcrypto; JobPeers (job_peers.h) is built from it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tiering/peers/config/peer_list.h"
#include "tiering/peers/config/source_port.h"

namespace tierfs {

// The chunk sizes peers exchange: a request or an offer of a chunk outside
// [kMinWireChunk, kMaxWireChunk] is refused (wire.h).
inline constexpr uint64_t kMinWireChunk = 4096;
inline constexpr uint64_t kMaxWireChunk = uint64_t{1} << 30;

struct JobPeersConfig {
  std::vector<PeerEntry> peers;                   // the whole job, this node included
  std::string self;                               // this node's name in `peers`
  std::string listen;                             // "" = this node's address from `peers`
  std::string job;                                // the job's identity, the same on every node
  std::string munge_socket;                       // "" = libmunge's default
  std::chrono::milliseconds timeout{5000};        // a fetch's deadline
  std::chrono::milliseconds dead_after{10000};    // a peer silent this long is dead
  std::chrono::milliseconds idle_close{1800000};  // a connection unused this long is closed
  size_t max_connections = 1024;                  // connections to peers open at once, each way
  uint64_t chunk_size = 8 << 20;
  unsigned server_threads = 16;  // provider calls at once
  std::string ucx_tls;           // "" = UCX's choice (or UCX_TLS)
  // The ports below 1024 this node connects from when root (source_ports.h).
  SourcePort source_ports = SourcePort::kReservedIfAllowed;
};

}  // namespace tierfs
