// MetricsServer: an optional HTTP endpoint (-o metrics=[HOST:]PORT) serving
// the Prometheus text format at /metrics (Boost.Asio). It binds loopback
// unless a host is given. The socket is bound before the daemon forks (so a
// busy port fails the mount with a message); the serving thread starts after.
// One connection at a time, each bounded in size and time: a slow or hostile
// client cannot hold it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace tierfs {

class MetricsServer {
 public:
  // Binds and listens on `spec` ("9100", "127.0.0.1:9100", "[::1]:9100",
  // "0.0.0.0:9100"); `render` makes the exposition text of each scrape.
  // Returns nullptr with a message in *error.
  static std::unique_ptr<MetricsServer> Bind(const std::string& spec,
                                             std::function<std::string()> render,
                                             std::string* error);
  ~MetricsServer();

  void Start();  // the serving thread
  void Stop();   // stops and joins it
  uint16_t port() const { return port_; }
  const std::string& address() const { return address_; }

 private:
  MetricsServer() = default;
  void Serve();

  int fd_ = -1;
  bool v6_ = false;
  uint16_t port_ = 0;
  std::string address_;
  std::function<std::string()> render_;
  struct Loop;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace tierfs
