#include "tiering/peers/secure/source_ports.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace tierfs {
namespace {

constexpr size_t kCandidates = 8;

bool Skipped(uint16_t port, const PortRanges& skip) {
  for (const auto& [lo, hi] : skip) {
    if (port >= lo && port <= hi) return true;
  }
  return false;
}

std::string ReadFile(const char* path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

PortRanges LocalReservedPorts() {
  return ParsePortRanges(ReadFile("/proc/sys/net/ipv4/ip_local_reserved_ports"));
}

std::vector<uint16_t> SourcePortCandidates(SourcePort ports, const PortRanges& skip,
                                           const PeerNonce& random) {
  std::vector<uint16_t> free;
  if (!ports.reserved()) return free;
  for (unsigned p = ports.first; p <= ports.last; ++p) {
    if (!Skipped(static_cast<uint16_t>(p), skip)) free.push_back(static_cast<uint16_t>(p));
  }
  if (free.size() <= kCandidates) return free;
  std::vector<uint16_t> out;
  for (size_t i = 0; i + 1 < random.size() && out.size() < kCandidates; i += 2) {
    const unsigned r = random[i] | unsigned{random[i + 1]} << 8;
    out.push_back(free[r % free.size()]);
  }
  return out;
}

std::string SourcePortsProblem(SourcePort ports, std::string_view unprivileged_port_start,
                               const PortRanges& reserved) {
  if (!ports.reserved()) return "";
  unsigned start = kFirstUnreservedPort;
  if (!unprivileged_port_start.empty() && !ParsePortNumber(unprivileged_port_start, &start)) {
    start = kFirstUnreservedPort;
  }
  if (start < kFirstUnreservedPort) {
    return fmt::format(
        "net.ipv4.ip_unprivileged_port_start is {} on this node: any user here may bind ports "
        "{}-1023, so this node's connections from those ports prove nothing to the other "
        "nodes, and another user can take the places they keep for this node's root daemon "
        "(set it to 1024 on every node of the cluster)",
        start, start);
  }
  if (SourcePortCandidates(ports, reserved, PeerNonce{}).empty()) {
    return fmt::format(
        "every port of peer_source_ports={} is in net.ipv4.ip_local_reserved_ports: this "
        "node connects to the others from any port, without the places kept for root daemons",
        SourcePortsText(ports));
  }
  return "";
}

std::string SourcePortsProblemHere(SourcePort ports) {
  return SourcePortsProblem(ports, ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"),
                            LocalReservedPorts());
}

}  // namespace tierfs
