// SourcePort: the range of ports below 1024 a daemon's connections to other
// nodes' doors come from (-o peer_source_ports=), and the parsing of port
// ranges. A leaf: the option parser reads it without the peer stack;
// source_ports.h picks a port of the range.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tierfs {

// The first port any user may bind (the kernel's default
// net.ipv4.ip_unprivileged_port_start).
inline constexpr uint16_t kFirstUnreservedPort = 1024;

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

// A port number (0..65535), blanks and a trailing newline around it allowed.
bool ParsePortNumber(std::string_view text, unsigned* out);
// "LO-HI" (1 <= LO <= HI <= 1023) or "off"; false with `why` otherwise.
bool ParseSourcePorts(std::string_view text, SourcePort* out, std::string* why);
std::string SourcePortsText(SourcePort ports);  // "600-1023" or "off"

// Port ranges as /proc/sys/net/ipv4/ip_local_reserved_ports lists them
// ("8080,9000-9100", or empty). Entries that do not parse are skipped.
using PortRanges = std::vector<std::pair<uint16_t, uint16_t>>;
PortRanges ParsePortRanges(std::string_view text);

}  // namespace tierfs
