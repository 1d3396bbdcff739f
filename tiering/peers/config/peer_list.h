// The job's peer list (-o peers=): which nodes serve each other's chunks
// and where they listen. No UCX here: the option parser and its fuzz
// target use it.
//
// A list is either inline, "n1+n2+n3" (each name is also its host, every
// port the default), or the contents of a file with one peer per line:
//   NAME [HOST][:PORT]     # a comment
// HOST defaults to NAME and PORT to the mount's peer_port. Blank lines and
// '#' comments are skipped. Names are unique; at most kMaxPeers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tiering/base/status.h"

namespace tierfs {

inline constexpr size_t kMaxPeers = 4096;
inline constexpr size_t kMaxPeerName = 255;

struct PeerEntry {
  std::string name;  // as the other nodes list this one
  std::string host;  // a name or an address to connect to
  uint16_t port = 0;
  bool operator==(const PeerEntry&) const = default;
};

// Parses a file's contents; an error (EINVAL) names the line.
Result<std::vector<PeerEntry>> ParsePeerFile(std::string_view text, uint16_t default_port);
// Parses "n1+n2+...".
Result<std::vector<PeerEntry>> ParsePeerInline(std::string_view text, uint16_t default_port);
// A peer name or host: 1..255 of [A-Za-z0-9._-], not starting with '-' or '.'.
bool ValidPeerName(std::string_view name);

}  // namespace tierfs
