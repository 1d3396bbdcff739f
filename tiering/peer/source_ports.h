// The ports a daemon's connections to other nodes' doors come from
// (ConnectTcp, peer_handshake.h). A door keeps places of its own for
// connections from ports below 1024 (peer_door.h): on a node where only
// root may bind those (net.ipv4.ip_unprivileged_port_start at 1024, the
// kernel's default) they can only be a root daemon's, so no other user of
// that node can take them. A daemon run as root binds one of a range
// (peer_source_ports=, 600-1023 by default, as bindresvport does), skipping
// those the site keeps for its services (net.ipv4.ip_local_reserved_ports);
// a daemon that may not bind them, or told `off`, connects from any port.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tiering/peer/peer_auth.h"

namespace tierfs {

// A range of source ports, first..last (within 1..1023); 0..0: any port.
struct SourcePort {
  uint16_t first = 0, last = 0;
  bool reserved() const { return first != 0; }
  friend bool operator==(const SourcePort&, const SourcePort&) = default;
  static const SourcePort kAny;
  static const SourcePort kReservedIfAllowed;  // 600-1023
};
inline constexpr SourcePort SourcePort::kAny{0, 0};
inline constexpr SourcePort SourcePort::kReservedIfAllowed{600, 1023};

// "LO-HI" (1 <= LO <= HI <= 1023) or "off"; false with `why` otherwise.
bool ParseSourcePorts(std::string_view text, SourcePort* out, std::string* why);
std::string SourcePortsText(SourcePort ports);  // "600-1023" or "off"

// Port ranges as /proc/sys/net/ipv4/ip_local_reserved_ports lists them
// ("8080,9000-9100", or empty). Entries that do not parse are skipped.
using PortRanges = std::vector<std::pair<uint16_t, uint16_t>>;
PortRanges ParsePortRanges(std::string_view text);
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
