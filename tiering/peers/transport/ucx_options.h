// UcxOptions: how a UCX worker (ucx_worker.h) is made, in a header of its
// own with no UCX type, so that the options of a peer client or server can
// be written by code that never sees UCX.
#pragma once

#include <chrono>
#include <string>

namespace tierfs {

struct UcxOptions {
  std::string tls;             // UCX_TLS ("" = UCX's default, or the environment's)
  std::string tcp_port_range;  // UCX_TCP_PORT_RANGE, the TCP transport's ports ("" = any)
  std::string net_devices;     // UCX_NET_DEVICES ("" = UCX's default, or the environment's)
  std::chrono::milliseconds tick{20};
  // An abort inside UCX on the progress thread wedges this worker instead
  // of ending the process (ucx_abort.h). The daemon's workers set it.
  bool contain_aborts = false;
};

}  // namespace tierfs
