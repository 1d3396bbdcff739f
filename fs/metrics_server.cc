#include "fs/metrics_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <utility>

// After <utility>: Boost 1.74's Asio uses std::exchange without including it.
#include <boost/asio.hpp>

#include "tiering/log.h"

namespace tierfs {

namespace asio = boost::asio;
using asio::ip::tcp;

struct MetricsServer::Loop {
  asio::io_context io;
  std::unique_ptr<tcp::acceptor> acceptor;
};

namespace {

constexpr size_t kMaxRequest = 8192;

bool ParseSpec(const std::string& spec, std::string* host, uint16_t* port) {
  std::string port_text = spec;
  *host = "127.0.0.1";
  if (!spec.empty() && spec[0] == '[') {
    size_t close = spec.find("]:");
    if (close == std::string::npos) return false;
    *host = spec.substr(1, close - 1);
    port_text = spec.substr(close + 2);
  } else if (size_t colon = spec.rfind(':'); colon != std::string::npos) {
    *host = spec.substr(0, colon);
    port_text = spec.substr(colon + 1);
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port_text.empty() ||
      value > 65535 || host->empty()) {
    return false;
  }
  *port = static_cast<uint16_t>(value);
  return true;
}

std::string Response(const char* status, const char* type, const std::string& body) {
  return fmt::format(
      "HTTP/1.0 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
      status, type, body.size(), body);
}

}  // namespace

std::unique_ptr<MetricsServer> MetricsServer::Bind(const std::string& spec,
                                                   std::function<std::string()> render,
                                                   std::string* error) {
  std::string host;
  uint16_t port;
  if (!ParseSpec(spec, &host, &port)) {
    *error = fmt::format("metrics='{}' is not [HOST:]PORT (e.g. 9100 or 127.0.0.1:9100)", spec);
    return nullptr;
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  sockaddr_storage addr{};
  socklen_t len;
  auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (::inet_pton(AF_INET, host.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    len = sizeof(*a4);
  } else if (::inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    len = sizeof(*a6);
    server->v6_ = true;
  } else {
    *error = fmt::format("metrics: '{}' is not a numeric IPv4 or IPv6 address", host);
    return nullptr;
  }
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 16) != 0) {
    *error = fmt::format("metrics: cannot listen on {}: {}", spec, std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return nullptr;
  }
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  server->port_ = ntohs(server->v6_ ? a6->sin6_port : a4->sin_port);
  server->address_ = server->v6_ ? fmt::format("[{}]:{}", host, server->port_)
                                 : fmt::format("{}:{}", host, server->port_);
  server->fd_ = fd;
  server->render_ = std::move(render);
  return server;
}

MetricsServer::~MetricsServer() {
  Stop();
  if (fd_ >= 0 && !loop_) ::close(fd_);  // never handed to Asio
}

void MetricsServer::Start() {
  if (thread_.joinable()) return;
  loop_ = std::make_unique<Loop>();
  loop_->acceptor = std::make_unique<tcp::acceptor>(loop_->io);
  loop_->acceptor->assign(v6_ ? tcp::v6() : tcp::v4(), fd_);  // Asio owns the fd now
  thread_ = std::thread([this] { Serve(); });
  TIERFS_LOG(kInfo, "metrics on http://{}/metrics", address_);
}

void MetricsServer::Stop() {
  if (!thread_.joinable()) return;
  loop_->io.stop();
  thread_.join();
}

void MetricsServer::Serve() {
  std::function<void()> accept = [&] {
    loop_->acceptor->async_accept([&](boost::system::error_code ec, tcp::socket socket) {
      if (!ec) {
        // Bounded: 2 s to send the request, at most kMaxRequest bytes. (Asio
        // waits with poll() on its own, so SO_RCVTIMEO would not apply.)
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        std::string request;
        char buf[1024];
        boost::system::error_code rec;
        while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequest) {
          auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
              deadline - std::chrono::steady_clock::now());
          pollfd p{socket.native_handle(), POLLIN, 0};
          if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
          size_t n = socket.read_some(asio::buffer(buf), rec);
          if (rec) break;
          request.append(buf, n);
        }
        std::string reply;
        if (request.rfind("GET /metrics ", 0) == 0 || request.rfind("GET /metrics?", 0) == 0) {
          reply = Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", render_());
        } else if (request.rfind("GET ", 0) == 0) {
          reply = Response("404 Not Found", "text/plain", "tierfs serves /metrics only\n");
        } else {
          reply = Response("400 Bad Request", "text/plain", "bad request\n");
        }
        boost::system::error_code wec;
        asio::write(socket, asio::buffer(reply), wec);
      }
      if (ec != asio::error::operation_aborted) accept();
    });
  };
  accept();
  loop_->io.run();
}

}  // namespace tierfs
