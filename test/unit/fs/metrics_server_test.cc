#include "fs/telemetry/metrics_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "require_ok.h"

namespace tierfs {
namespace {

// A client socket to 127.0.0.1:port, 5 s receive timeout; -1 on failure.
int Connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `request`, then reads `responses` whole responses (header + Content-Length body).
std::string Exchange(int fd, const std::string& request, int responses = 1) {
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string in;
  char buf[4096];
  for (size_t done = 0; responses > 0;) {
    size_t end = in.find("\r\n\r\n", done);
    if (end != std::string::npos) {
      size_t cl = in.find("Content-Length: ", done);
      size_t length = cl < end ? std::stoul(in.substr(cl + 16)) : 0;
      if (in.size() >= end + 4 + length) {
        done = end + 4 + length;
        --responses;
        continue;
      }
    }
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  return in;
}

std::string Get(uint16_t port, const std::string& request) {
  int fd = Connect(port);
  std::string reply = Exchange(fd, request);
  ::close(fd);
  return reply;
}

struct Server {
  explicit Server(std::function<std::string()> render) {
    server = RequireOk(MetricsServer::Bind("127.0.0.1:0", std::move(render)));
    server->Start();
  }
  std::unique_ptr<MetricsServer> server;
};

const char* kGet = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";

}  // namespace

TEST_CASE("metrics server refuses a bad address with EINVAL and a taken port with its errno",
          "[metrics_server]") {
  auto render = [] { return std::string(); };
  Status bad = MetricsServer::Bind("localhost:x", render).status();
  CHECK(bad.code() == EINVAL);
  CHECK_THAT(bad.message(), Catch::Contains("is not [HOST:]PORT"));
  CHECK(MetricsServer::Bind("example.org:9100", render).status().code() == EINVAL);
  Server first(render);
  Status taken =
      MetricsServer::Bind(fmt::format("127.0.0.1:{}", first.server->port()), render).status();
  CHECK(taken.code() == EADDRINUSE);
  CHECK_THAT(taken.message(), Catch::Contains("cannot listen on"));
}

TEST_CASE("metrics server answers /metrics, 404, 405 and 400", "[metrics_server]") {
  Server s([] { return std::string("tierfs_up 1\n"); });
  uint16_t port = s.server->port();
  std::string ok = Get(port, "GET /metrics HTTP/1.0\r\n\r\n");
  CHECK(ok.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
  CHECK(ok.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n") != ok.npos);
  CHECK(ok.substr(ok.size() - 12) == "tierfs_up 1\n");
  CHECK(Get(port, "GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .rfind("HTTP/1.1 200", 0) == 0);
  CHECK(Get(port, "GET /other HTTP/1.1\r\nHost: x\r\n\r\n").rfind("HTTP/1.1 404", 0) == 0);
  CHECK(Get(port, "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").rfind("HTTP/1.1 405", 0) == 0);
  CHECK(Get(port, "hello there\r\n\r\n").rfind("HTTP/1.1 400", 0) == 0);
  // A body is refused (GET only, no body): the connection is answered 400 or closed.
  std::string body = Get(port, "GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  CHECK(body.find(" 200 ") == body.npos);
}

TEST_CASE("metrics server keeps a connection alive across scrapes", "[metrics_server]") {
  std::atomic<int> renders{0};
  Server s([&] { return std::to_string(++renders) + "\n"; });
  int fd = Connect(s.server->port());
  std::string two = Exchange(fd, std::string(kGet) + kGet, 2);
  ::close(fd);
  CHECK(two.find("\r\n\r\n1\n") != two.npos);
  CHECK(two.find("\r\n\r\n2\n") != two.npos);
  CHECK(renders == 2);
}

TEST_CASE("a throw while rendering answers 500 and the server goes on", "[metrics_server]") {
  std::atomic<int> calls{0};
  Server s([&]() -> std::string {
    if (++calls == 1) throw std::runtime_error("boom");
    return "fine\n";
  });
  CHECK(Get(s.server->port(), kGet).rfind("HTTP/1.1 500", 0) == 0);
  CHECK(Get(s.server->port(), kGet).rfind("HTTP/1.1 200", 0) == 0);
}

TEST_CASE("idle clients neither hold the server nor exceed the bound", "[metrics_server]") {
  Server s([] { return std::string("x 1\n"); });
  uint16_t port = s.server->port();
  std::vector<int> idle;
  for (int i = 0; i < MetricsServer::kMaxConnections - 1; ++i) idle.push_back(Connect(port));
  auto t0 = std::chrono::steady_clock::now();
  // Served at once although 63 clients are connected and silent.
  int fd = Connect(port);
  CHECK(Exchange(fd, kGet).rfind("HTTP/1.1 200", 0) == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
  // Now 64 are open: one more is closed unserved, and counted.
  int extra = Connect(port);
  char c;
  CHECK(::recv(extra, &c, 1, 0) <= 0);
  CHECK(s.server->rejected_connections() == 1);
  ::close(extra);
  ::close(fd);
  // The silent ones are dropped after 2 s; the server serves again.
  char buf[16];
  for (int i : idle) CHECK(::recv(i, buf, sizeof(buf), 0) == 0);
  for (int i : idle) ::close(i);
  CHECK(Get(port, kGet).rfind("HTTP/1.1 200", 0) == 0);
}

}  // namespace tierfs
