// The ports a daemon's connections to other nodes' doors come from
// (ConnectTcp, peer_handshake.h). A door keeps places of its own for
// connections from ports below 1024 (peer_door.h): on a node where only
// root may bind those (net.ipv4.ip_unprivileged_port_start at 1024, the
// kernel's default) they can only be a root daemon's, so no other user of
// that node can take them. A daemon run as root binds one of a range
// (peer_source_ports=, 600-1023 by default, as bindresvport does), skipping
// those the site keeps for its services (net.ipv4.ip_local_reserved_ports);
// a daemon that may not bind them, or told `off`, connects from any port.
// The range itself and its parsing: source_port.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tiering/peers/config/source_port.h"
#include "tiering/peers/secure/peer_auth.h"

namespace tierfs {

// This node's (its network namespace's), read at each call: a connection
// is rare, the file small (empty if unreadable).
PortRanges LocalReservedPorts();

// Up to 8 ports of `ports` outside `skip`, drawn with `random`; fewer when
// fewer are left, none when `skip` covers the range.
std::vector<uint16_t> SourcePortCandidates(SourcePort ports, const PortRanges& skip,
                                           const PeerNonce& random);

// What an operator should know about `ports` on this node, given its
// ip_unprivileged_port_start (the file's text; "" if unreadable: a kernel
// before 4.11, where it is 1024) and its reserved ports: "" when nothing;
// else a sentence for the log (the premise does not hold, or every port of
// the range is reserved).
std::string SourcePortsProblem(SourcePort ports, std::string_view unprivileged_port_start,
                               const PortRanges& reserved);
// The same, read from this node's /proc (logged by JobPeers at start).
std::string SourcePortsProblemHere(SourcePort ports);

}  // namespace tierfs
