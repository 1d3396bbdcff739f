#include "fs/telemetry/metrics_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <utility>

// After <utility>: Boost 1.74's Asio uses std::exchange without including it.
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "tiering/base/log.h"

namespace tierfs {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

struct MetricsServer::Loop {
  int open = 0;  // connections alive; first member: outlives the io_context's handlers
  asio::io_context io;
  std::unique_ptr<tcp::acceptor> acceptor;
};

namespace {

constexpr auto kReadTimeout = std::chrono::seconds(2);    // a whole request, or keep-alive idle
constexpr auto kWriteTimeout = std::chrono::seconds(10);  // the whole response
constexpr uint32_t kMaxHeader = 8192;

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

// One client connection on the serving thread: read a request, answer it,
// again while the client keeps the connection alive. The pending operation's
// handler owns it (shared_ptr): when none is pending, it closes.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, const std::function<std::string()>* render, int* open)
      : stream_(std::move(socket)), render_(render), open_(open) {
    ++*open_;
  }
  ~Connection() { --*open_; }

  void Read() {
    parser_.emplace();
    parser_->header_limit(kMaxHeader);
    parser_->body_limit(0);  // a GET has no body
    stream_.expires_after(kReadTimeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout) return Close();
    if (ec && &ec.category() != &http::make_error_code(http::error::bad_target).category()) {
      return Close();  // reset, aborted at Stop(): nobody to answer
    }
    if (ec) return Reply(Text(http::status::bad_request, 11, false, "bad request\n"));
    const auto& req = parser_->get();
    if (req.method() != http::verb::get) {
      auto res = Text(http::status::method_not_allowed, req.version(), req.keep_alive(),
                      "tierfs serves GET /metrics only\n");
      res.set(http::field::allow, "GET");
      return Reply(std::move(res));
    }
    std::string_view target(req.target().data(), req.target().size());
    if (target != "/metrics" && target.rfind("/metrics?", 0) != 0) {
      return Reply(Text(http::status::not_found, req.version(), req.keep_alive(),
                        "tierfs serves /metrics only\n"));
    }
    std::string body;
    try {
      body = (*render_)();
    } catch (const std::exception& e) {
      TIERFS_LOG(kWarning, "metrics: rendering failed: {}", e.what());
      return Reply(Text(http::status::internal_server_error, req.version(), false,
                        "tierfs could not render its metrics\n"));
    }
    auto res = Text(http::status::ok, req.version(), req.keep_alive(), std::move(body));
    res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    Reply(std::move(res));
  }

  static http::response<http::string_body> Text(http::status status, unsigned version,
                                                bool keep_alive, std::string body) {
    http::response<http::string_body> res{status, version};
    res.set(http::field::server, "tierfs");
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.keep_alive(keep_alive);
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
  }

  void Reply(http::response<http::string_body> res) {
    res_ = std::move(res);  // a member: it must outlive async_write
    stream_.expires_after(kWriteTimeout);
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec || !self->res_.keep_alive()) return self->Close();
      self->Read();
    });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{kMaxHeader};
  std::optional<http::request_parser<http::empty_body>> parser_;
  http::response<http::string_body> res_;
  const std::function<std::string()>* render_;
  int* open_;
};

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::Bind(const std::string& spec,
                                                           std::function<std::string()> render) {
  std::string host;
  uint16_t port;
  if (!ParseSpec(spec, &host, &port)) {
    return Status::Error(
        EINVAL, fmt::format("metrics='{}' is not [HOST:]PORT (e.g. 9100 or 127.0.0.1:9100)", spec));
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
    return Status::Error(EINVAL,
                         fmt::format("metrics: '{}' is not a numeric IPv4 or IPv6 address", host));
  }
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    Status failed = Status::FromErrno(errno, fmt::format("metrics: cannot listen on {}", spec));
    if (fd >= 0) ::close(fd);
    return failed;
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

void MetricsServer::Accept() {
  loop_->acceptor->async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec && loop_->open >= kMaxConnections) {
      if (rejected_++ == 0) {
        TIERFS_LOG(kWarning, "metrics: {} connections open; closing new ones (counted)",
                   kMaxConnections);
      }
      socket.close(ec);
    } else if (!ec) {
      try {
        std::make_shared<Connection>(std::move(socket), &render_, &loop_->open)->Read();
      } catch (...) {  // that connection is lost, not the next ones
        TIERFS_LOG(kWarning, "metrics: {}", DescribeCurrentException());
      }
    }
    Accept();
  });
}

void MetricsServer::Serve() {
  Accept();
  // A throw out of a handler loses that connection only: the loop goes on.
  for (;;) {
    try {
      loop_->io.run();
      return;  // stopped
    } catch (...) {
      TIERFS_LOG(kWarning, "metrics: {}", DescribeCurrentException());
    }
  }
}

}  // namespace tierfs
