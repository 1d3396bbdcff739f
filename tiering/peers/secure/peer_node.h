// PeerNode: this node as the job's other nodes know it, made once when
// the peers start (by the peer front door, fs/peers/peer_service.cc) and
// shared by both halves: the client (tiering/peers/client) asks as it, the
// server (tiering/peers/server) listens and answers as it. The listening
// socket a privileged parent may hand the daemon is the mount's
// (fs/mount/inherited_listener.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tiering/base/status.h"
#include "tiering/peers/config/job_peers_config.h"
#include "tiering/peers/secure/peer_auth.h"

namespace tierfs {

struct PeerNode {
  // The address its peers reach it at, and its port in the peer list.
  std::string listen_host;
  uint16_t listen_port = 0;
  // The interface UCX's own TCP listeners are kept to ("" = UCX's choice).
  std::string net_device;
  // Its MUNGE identity: the job, its name, this process's uid and gid.
  std::unique_ptr<PeerAuth> auth;

  // From the options: `config.self` must be in the list. Resolves this
  // node's address (config.listen, else its entry's host; a name that
  // resolves to loopback gives the address routed towards the others).
  static Result<std::unique_ptr<PeerNode>> Make(const JobPeersConfig& config);
};

}  // namespace tierfs
