#include "tiering/peers/config/source_port.h"

#include <fmt/format.h>

#include <charconv>

namespace tierfs {

bool ParsePortNumber(std::string_view s, unsigned* out) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty() && *out <= 65535;
}

bool ParseSourcePorts(std::string_view text, SourcePort* out, std::string* why) {
  if (text == "off") {
    *out = SourcePort::kAny;
    return true;
  }
  const size_t dash = text.find('-');
  unsigned lo = 0, hi = 0;
  if (dash == std::string_view::npos || !ParsePortNumber(text.substr(0, dash), &lo) ||
      !ParsePortNumber(text.substr(dash + 1), &hi)) {
    *why = fmt::format("'{}' is not LO-HI (ports) or off", text);
    return false;
  }
  if (lo < 1 || lo > hi || hi >= kFirstUnreservedPort) {
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
      if (ParsePortNumber(item, &lo)) out.emplace_back(lo, lo);
    } else if (ParsePortNumber(item.substr(0, dash), &lo) &&
               ParsePortNumber(item.substr(dash + 1), &hi) && lo <= hi) {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

}  // namespace tierfs
