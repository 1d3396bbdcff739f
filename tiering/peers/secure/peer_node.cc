#include "tiering/peers/secure/peer_node.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "tiering/base/log.h"

namespace tierfs {
namespace {

// The IPv4 address `host` names, or why not.
Result<std::string> ResolveIpv4(const std::string& host) {
  struct addrinfo hints {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  int e = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (e != 0 || res == nullptr) {
    return Status::Error(EADDRNOTAVAIL, fmt::format("cannot resolve this node's peer address "
                                                    "'{}': {}",
                                                    host, gai_strerror(e)));
  }
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, text, sizeof text);
  ::freeaddrinfo(res);
  return std::string(text);
}

// This node's address for its peers: its entry's host, resolved. A name
// that resolves to a loopback address (Debian puts "127.0.1.1 HOSTNAME" in
// /etc/hosts) while the other peers are elsewhere gives instead the local
// address the kernel routes to the first of them (a UDP socket connected
// to it, never sent on).
Result<std::string> OwnAddress(const PeerEntry& me, const std::vector<PeerEntry>& peers) {
  Result<std::string> resolved = ResolveIpv4(me.host);
  if (!resolved.ok() || resolved->rfind("127.", 0) != 0) return resolved;
  const std::string own = *resolved;
  for (const PeerEntry& p : peers) {
    if (p.name == me.name) continue;
    Result<std::string> resolved_other = ResolveIpv4(p.host);
    if (!resolved_other.ok() || resolved_other->rfind("127.", 0) == 0) continue;
    const std::string& other = *resolved_other;
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(p.port != 0 ? p.port : 9);
    ::inet_pton(AF_INET, other.c_str(), &to.sin_addr);
    sockaddr_in local{};
    socklen_t len = sizeof local;
    bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 &&
              ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    if (fd >= 0) ::close(fd);
    if (!ok) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
    TIERFS_LOG(kInfo,
               "peers: '{}' resolves to {} (loopback): listening on {}, the address "
               "towards '{}'",
               me.host, own, text, p.name);
    return std::string(text);
  }
  return own;
}

// The network interface that holds IPv4 address `address`, so that UCX's
// own TCP listeners stay on it; "" if none does (0.0.0.0), or if the node
// has RDMA devices, which restricting UCX to one interface would hide.
std::string InterfaceOf(const std::string& address) {
  std::error_code ec;
  if (std::filesystem::exists("/sys/class/infiniband", ec) &&
      !std::filesystem::is_empty("/sys/class/infiniband", ec)) {
    return "";
  }
  in_addr want{};
  if (::inet_pton(AF_INET, address.c_str(), &want) != 1 || want.s_addr == INADDR_ANY) return "";
  struct ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string name;
  for (struct ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == want.s_addr) {
      name = i->ifa_name;
      break;
    }
  }
  ::freeifaddrs(list);
  return name;
}

}  // namespace

Result<std::unique_ptr<PeerNode>> PeerNode::Make(const JobPeersConfig& config) {
  const PeerEntry* me = nullptr;
  for (const PeerEntry& p : config.peers) {
    if (p.name == config.self) me = &p;
  }
  if (me == nullptr) {
    return Status::Error(EINVAL, "this node ('" + config.self + "') is not in the peer list");
  }
  auto node = std::make_unique<PeerNode>();
  node->listen_port = me->port;
  node->listen_host = config.listen;
  if (node->listen_host.empty()) {
    Result<std::string> own = OwnAddress(*me, config.peers);
    if (!own.ok()) return own.status();
    node->listen_host = std::move(*own);
  }
  // UCX's TCP transport listens too (for the endpoints made after the
  // handshake): on this interface only, unless the site says otherwise.
  node->net_device =
      std::getenv("UCX_NET_DEVICES") != nullptr ? "" : InterfaceOf(node->listen_host);
  node->auth = std::make_unique<PeerAuth>(
      PeerIdentity{config.job, config.self, ::geteuid(), ::getegid()}, config.munge_socket);
  return node;
}

}  // namespace tierfs
