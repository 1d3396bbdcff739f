#include "tiering/peers/config/peer_list.h"

#include <fmt/format.h>

#include <charconv>
#include <unordered_set>

namespace tierfs {
namespace {

bool ValidPort(std::string_view text, uint16_t* port) {
  unsigned v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v == 0 || v > 65535) return false;
  *port = static_cast<uint16_t>(v);
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Appends one entry, checking it. `where` names it in an error.
Status Add(std::string_view name, std::string_view address, uint16_t default_port,
           const std::string& where, std::unordered_set<std::string>* seen,
           std::vector<PeerEntry>* out) {
  if (!ValidPeerName(name)) {
    return Status::Error(
        EINVAL, fmt::format("{}: '{}' is not a valid peer name (letters, digits, '.', '_', '-')",
                            where, name));
  }
  PeerEntry e{std::string(name), std::string(name), default_port};
  if (!address.empty()) {
    std::string_view host = address;
    if (size_t colon = address.rfind(':'); colon != std::string_view::npos) {
      host = address.substr(0, colon);
      if (!ValidPort(address.substr(colon + 1), &e.port)) {
        return Status::Error(EINVAL, fmt::format("{}: '{}' is not a port (1-65535)", where,
                                                 address.substr(colon + 1)));
      }
    }
    if (!host.empty()) {
      if (!ValidPeerName(host)) {
        return Status::Error(
            EINVAL, fmt::format("{}: '{}' is not a host name or IPv4 address", where, host));
      }
      e.host = std::string(host);
    }
  }
  if (e.port == 0) {
    return Status::Error(EINVAL, fmt::format("{}: no port for '{}' (set peer_port)", where, name));
  }
  if (!seen->insert(e.name).second) {
    return Status::Error(EINVAL, fmt::format("{}: '{}' is listed twice", where, name));
  }
  if (out->size() == kMaxPeers) {
    return Status::Error(EINVAL, fmt::format("{}: more than {} peers", where, kMaxPeers));
  }
  out->push_back(std::move(e));
  return Status::Ok();
}

}  // namespace

bool ValidPeerName(std::string_view name) {
  if (name.empty() || name.size() > kMaxPeerName || name[0] == '-' || name[0] == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<std::vector<PeerEntry>> ParsePeerFile(std::string_view text, uint16_t default_port) {
  std::vector<PeerEntry> peers;
  std::unordered_set<std::string> seen;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = Trim(line);
    if (line.empty()) continue;
    std::string_view name = line, address;
    if (size_t sp = line.find_first_of(" \t"); sp != std::string_view::npos) {
      name = line.substr(0, sp);
      address = Trim(line.substr(sp));
      if (address.find_first_of(" \t") != std::string_view::npos) {
        return Status::Error(EINVAL, fmt::format("line {}: expected NAME [HOST][:PORT]", line_no));
      }
    }
    if (Status s = Add(name, address, default_port, fmt::format("line {}", line_no), &seen, &peers);
        !s.ok()) {
      return s;
    }
  }
  if (peers.empty()) {
    return Status::Error(EINVAL, "no peers listed");
  }
  return peers;
}

Result<std::vector<PeerEntry>> ParsePeerInline(std::string_view text, uint16_t default_port) {
  std::vector<PeerEntry> peers;
  std::unordered_set<std::string> seen;
  while (true) {
    size_t plus = text.find('+');
    std::string_view name = text.substr(0, plus);
    if (Status s = Add(name, {}, default_port, "peers", &seen, &peers); !s.ok()) return s;
    if (plus == std::string_view::npos) break;
    text.remove_prefix(plus + 1);
  }
  return peers;
}

}  // namespace tierfs
