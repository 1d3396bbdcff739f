#include "tiering/peer/source_ports.h"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <sstream>

namespace tierfs {
namespace {

constexpr uint16_t kFirstUnreserved = 1024;
constexpr size_t kCandidates = 8;

bool ParsePort(std::string_view s, unsigned* out) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty() && *out <= 65535;
}

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

bool ParseSourcePorts(std::string_view text, SourcePort* out, std::string* why) {
  if (text == "off") {
    *out = SourcePort::kAny;
    return true;
  }
  const size_t dash = text.find('-');
  unsigned lo = 0, hi = 0;
  if (dash == std::string_view::npos || !ParsePort(text.substr(0, dash), &lo) ||
      !ParsePort(text.substr(dash + 1), &hi)) {
    *why = fmt::format("'{}' is not LO-HI (ports) or off", text);
    return false;
  }
  if (lo < 1 || lo > hi || hi >= kFirstUnreserved) {
    *why = fmt::format(
        "'{}' is not a range within 1-1023 (a port from 1024 up can be any user's: other "
        "nodes keep no places for it)",
        text);
    return false;
  }
  *out = SourcePort{static_cast<uint16_t>(lo), static_cast<uint16_t>(hi)};
  return true;
}

std::string SourcePortsText(SourcePort ports) {
  return ports.reserved() ? fmt::format("{}-{}", ports.first, ports.last) : "off";
}

PortRanges ParsePortRanges(std::string_view text) {
  PortRanges out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t dash = item.find('-');
    unsigned lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (ParsePort(item, &lo)) out.emplace_back(lo, lo);
    } else if (ParsePort(item.substr(0, dash), &lo) && ParsePort(item.substr(dash + 1), &hi) &&
               lo <= hi) {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

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
  unsigned start = kFirstUnreserved;
  if (!unprivileged_port_start.empty() && !ParsePort(unprivileged_port_start, &start)) {
    start = kFirstUnreserved;
  }
  if (start < kFirstUnreserved) {
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
