// The ports a root daemon connects to other nodes from: the option's
// range, the site's reserved ports skipped, and the trust premise (only
// root binds below 1024) checked and said when it does not hold.
#include "tiering/peers/secure/source_ports.h"

#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>

#include "tiering/peers/secure/peer_handshake.h"

namespace tierfs {
namespace {

TEST_CASE("source ports: the site's reserved ports are skipped", "[peer]") {
  CHECK(ParsePortRanges("") == PortRanges{});
  CHECK(ParsePortRanges("\n") == PortRanges{});
  CHECK(ParsePortRanges("8080,9000-9100\n") == PortRanges{{8080, 8080}, {9000, 9100}});
  CHECK(ParsePortRanges("700-650,x,611") ==
        PortRanges{{611, 611}});  // what does not parse: skipped

  // Every candidate is in the range and outside the reserved ports.
  const PortRanges skip = ParsePortRanges("600-700,702-1023");
  for (int i = 0; i < 20; ++i) {
    for (uint16_t p : SourcePortCandidates(SourcePort{600, 1023}, skip, RandomNonce())) {
      CHECK(p == 701);
    }
  }
  CHECK(SourcePortCandidates(SourcePort{600, 1023}, skip, RandomNonce()).size() == 1);
  CHECK(SourcePortCandidates(SourcePort{600, 700}, skip, RandomNonce()).empty());
  CHECK(SourcePortCandidates(SourcePort::kAny, {}, RandomNonce()).empty());
  std::set<uint16_t> seen;
  for (int i = 0; i < 20; ++i) {
    auto c = SourcePortCandidates(SourcePort{900, 999}, ParsePortRanges("950-999"), RandomNonce());
    CHECK(c.size() == 8);
    for (uint16_t p : c) {
      CHECK(p >= 900);
      CHECK(p < 950);
      seen.insert(p);
    }
  }
  CHECK(seen.size() > 20);  // drawn at random
}

TEST_CASE("source ports: the trust premise is checked", "[peer]") {
  const SourcePort ports = SourcePort::kReservedIfAllowed;
  CHECK(SourcePortsProblem(ports, "1024\n", {}).empty());
  CHECK(SourcePortsProblem(ports, "", {}).empty());  // a kernel without the setting: 1024
  CHECK_THAT(
      SourcePortsProblem(ports, "80\n", {}),
      Catch::Contains("ip_unprivileged_port_start is 80") && Catch::Contains("set it to 1024"));
  CHECK_THAT(SourcePortsProblem(ports, "0", {}), Catch::Contains("prove nothing"));
  CHECK(SourcePortsProblem(SourcePort::kAny, "0", {}).empty());  // off: nothing is claimed
  CHECK_THAT(SourcePortsProblem(SourcePort{700, 710}, "1024", ParsePortRanges("600-800")),
             Catch::Contains("every port of peer_source_ports=700-710"));
}

TEST_CASE("source ports: a root daemon connects from a port of its range", "[peer]") {
  if (::geteuid() != 0) {
    WARN("skipped: only root binds a port below 1024");
    return;
  }
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(listener, 16) == 0);
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const uint16_t port = ntohs(a.sin_port);
  auto from = [&](SourcePort ports) {
    Result<int> fd = ConnectTcp("127.0.0.1", port,
                                std::chrono::steady_clock::now() + std::chrono::seconds(2), ports);
    REQUIRE(fd.ok());
    sockaddr_in mine{};
    socklen_t n = sizeof mine;
    REQUIRE(::getsockname(*fd, reinterpret_cast<sockaddr*>(&mine), &n) == 0);
    int accepted = ::accept(listener, nullptr, nullptr);
    ::close(accepted);
    ::close(*fd);
    return ntohs(mine.sin_port);
  };
  for (int i = 0; i < 5; ++i) {
    const uint16_t p = from(SourcePort{900, 909});
    CHECK(p >= 900);
    CHECK(p <= 909);
  }
  CHECK(from(SourcePort::kAny) >= 1024);
  ::close(listener);
}

// In a child process with a network namespace of its own (loopback up):
// `setup` writes that namespace's settings, then `check` runs; its result
// is the child's exit status (0: it held).
int InNetworkNamespace(const std::function<void()>& setup, const std::function<bool()>& check) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int rc = 1;
    try {
      if (::unshare(CLONE_NEWNET) != 0) ::_exit(2);
      if (std::system("ip link set lo up") != 0) ::_exit(3);
      setup();
      rc = check() ? 0 : 1;
    } catch (...) {
    }
    ::_exit(rc);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

void WriteSetting(const char* path, const char* value) {
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr || std::fputs(value, f) < 0 || std::fclose(f) != 0) ::_exit(4);
}

// The port `ConnectTcp` binds from `ports` to a listener on loopback.
uint16_t ConnectedFrom(SourcePort ports) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listener, 4) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return 0;
  }
  Result<int> fd = ConnectTcp("127.0.0.1", ntohs(a.sin_port),
                              std::chrono::steady_clock::now() + std::chrono::seconds(2), ports);
  if (!fd.ok()) return 0;
  sockaddr_in mine{};
  len = sizeof mine;
  ::getsockname(*fd, reinterpret_cast<sockaddr*>(&mine), &len);
  return ntohs(mine.sin_port);
}

TEST_CASE("source ports: a node's reserved ports are skipped, its premise checked (namespaces)",
          "[peer]") {
  if (::geteuid() != 0) {
    WARN("skipped: a network namespace needs root");
    return;
  }
  // The site keeps every port of the range but 1023 for its services.
  CHECK(InNetworkNamespace(
            [] { WriteSetting("/proc/sys/net/ipv4/ip_local_reserved_ports", "600-1022"); },
            [] { return ConnectedFrom(SourcePort::kReservedIfAllowed) == 1023; }) == 0);
  // ... and all of it: any port, and the problem said.
  CHECK(InNetworkNamespace(
            [] { WriteSetting("/proc/sys/net/ipv4/ip_local_reserved_ports", "600-1023"); },
            [] {
              return ConnectedFrom(SourcePort::kReservedIfAllowed) >= 1024 &&
                     SourcePortsProblemHere(SourcePort::kReservedIfAllowed)
                             .find("ip_local_reserved_ports") != std::string::npos;
            }) == 0);
  // Users may bind below 1024 here: said at start.
  CHECK(InNetworkNamespace(
            [] { WriteSetting("/proc/sys/net/ipv4/ip_unprivileged_port_start", "500"); },
            [] {
              return SourcePortsProblemHere(SourcePort::kReservedIfAllowed)
                         .find("ip_unprivileged_port_start is 500") != std::string::npos;
            }) == 0);
  // The kernel's default: nothing to say.
  CHECK(InNetworkNamespace(
            [] {}, [] { return SourcePortsProblemHere(SourcePort::kReservedIfAllowed).empty(); }) ==
        0);
}

}  // namespace
}  // namespace tierfs
