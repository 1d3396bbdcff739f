// MetricsServer: an optional HTTP endpoint (-o metrics=[HOST:]PORT) serving
// the Prometheus text format at /metrics (HTTP/1.1 on Boost.Beast, keep-alive
// as Prometheus uses it). It binds loopback unless a host is given. The socket
// is bound before the daemon forks (so a busy port fails the mount with a
// message); the serving thread starts after. Connections are served
// concurrently on that one thread, at most kMaxConnections at once (more are
// closed at once and counted); each request is bounded in size (8 KiB of
// header, no body) and time (2 s to arrive, 10 s to be sent back), so a slow
// or hostile client holds one slot for 2 s at most and never the others. A
// throw while answering (render_ included) answers 500 or closes that
// connection, never the server.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "tiering/base/status.h"

namespace tierfs {

class MetricsServer {
 public:
  // Binds and listens on `spec` ("9100", "127.0.0.1:9100", "[::1]:9100",
  // "0.0.0.0:9100"); `render` makes the exposition text of each scrape.
  // Fails with a message: EINVAL for a bad spec, else the errno of
  // socket/bind/listen (EADDRINUSE: the port is taken).
  static Result<std::unique_ptr<MetricsServer>> Bind(const std::string& spec,
                                                     std::function<std::string()> render);
  ~MetricsServer();

  void Start();  // the serving thread
  void Stop();   // stops and joins it
  uint16_t port() const { return port_; }
  const std::string& address() const { return address_; }
  // Connections closed unserved because kMaxConnections were open.
  uint64_t rejected_connections() const { return rejected_; }

  static constexpr int kMaxConnections = 64;

 private:
  MetricsServer() = default;
  void Accept();
  void Serve();

  int fd_ = -1;
  bool v6_ = false;
  uint16_t port_ = 0;
  std::string address_;
  std::function<std::string()> render_;
  std::atomic<uint64_t> rejected_{0};
  struct Loop;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace tierfs
