#include "fs/peers/peer_service.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tiering/base/log.h"

namespace tierfs {
namespace {

// The tests' hook: SIGUSR2 asks the transports to fail (peer_service.h).
std::atomic<bool> g_fail_asked{false};
void OnFailSignal(int) { g_fail_asked.store(true); }

}  // namespace

Result<std::unique_ptr<PeerService>> PeerService::Start(JobPeers* peers, const Namespace* ns,
                                                        ReadPath* reads, int listener) {
  auto fail = [listener](Status s) {
    if (listener >= 0) ::close(listener);
    return s;
  };
  const JobPeersConfig& config = peers->config();
  // This node as the others know it, made once: the client asks as it and
  // the server answers as it.
  auto made = PeerNode::Make(config);
  if (!made.ok()) return fail(made.status());
  std::shared_ptr<const PeerNode> shared = std::move(made).value();
  if (Status s = peers->Start(shared); !s.ok()) return fail(s);
  const PeerNode& node = *shared;
  PeerServerOptions so;
  so.listen_host = node.listen_host;
  so.port = node.listen_port;
  so.inherited_fd = listener;
  so.ucx.net_devices = node.net_device;
  so.ucx.tls = config.ucx_tls;
  so.ucx.contain_aborts = true;  // a UCX abort here ends the serving, not the daemon
  so.chunk_size = config.chunk_size;
  so.threads = config.server_threads;
  // Its clients ping at least every dead_after / 4: a session silent for
  // three times dead_after is gone.
  so.idle_timeout = 3 * config.dead_after;
  so.max_connections = config.max_connections;
  // Each peer asks at most PeerClientOptions::max_in_flight (8) at once;
  // beyond this the answer is kBusy and the asker reads SOURCE.
  so.max_in_flight = 256;
  so.max_per_connection = 16;
  // Bytes being read or sent for peers: 256 MiB, or two chunks if more; a
  // peer may hold a quarter of it, or one chunk.
  so.max_bytes_in_flight = std::max<uint64_t>(uint64_t{256} << 20, 2 * config.chunk_size);
  so.max_bytes_per_connection = std::max(so.max_bytes_in_flight / 4, config.chunk_size);

  // From here on the service owns asking: its destructor stops it.
  std::unique_ptr<PeerService> service(new PeerService(peers, ns, reads, shared));
  auto server = PeerServer::Make(node.auth.get(), &service->reader_, so);
  if (!server.ok()) return fail(server.status());
  service->server_ = std::move(server).value();
  // The door's errors name the address ("cannot listen on HOST:PORT: ...").
  if (Status s = service->server_->Start(); !s.ok()) return s;
  service->ArmTestHook();
  PeerServer* served = service->server_.get();
  TransportWatch::Options watch;
  if (service->test_hook_) {
    watch.each_round = [peers, served] {
      if (!g_fail_asked.exchange(false)) return;
      TIERFS_LOG(kWarning, "peer transport: failing both sides, as asked (a test)");
      peers->WedgeForTest();
      served->WedgeForTest();
    };
  }
  service->watch_ = std::make_unique<TransportWatch>(
      std::vector<TransportWatch::Side>{{"asking", [peers] { return peers->transport_failed(); },
                                         [peers] { return peers->RestartTransport(); }},
                                        {"serving", [served] { return served->transport_failed(); },
                                         [served] { return served->RestartTransport(); }}},
      std::move(watch));
  service->watch_->Start();
  return service;
}

PeerService::~PeerService() { Stop(); }

void PeerService::ArmTestHook() {
  const char* hook = std::getenv("TIERFS_TEST_PEER_TRANSPORT_FAILURE");
  if (hook == nullptr || std::string_view(hook) != "SIGUSR2") return;
  struct sigaction sa {};
  sa.sa_handler = &OnFailSignal;
  ::sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGUSR2, &sa, nullptr) != 0) return;
  test_hook_ = true;
  TIERFS_LOG(kWarning,
             "TIERFS_TEST_PEER_TRANSPORT_FAILURE is set: SIGUSR2 makes the peer transport fail");
}

void PeerService::Stop() {
  if (watch_) watch_->Stop();
  if (server_) server_->Stop();
  peers_->Stop();
}

void PeerService::VisitCounters(const PeerService* service, CounterVisitor& v) {
  const PeerServer* server = service != nullptr ? service->server_.get() : nullptr;
  v.Flag("serving", server != nullptr, {"1 if this node answers the other nodes' requests."});
  const PeerServerCounters* served = server != nullptr ? &server->counters() : nullptr;
  v.Counter("served_chunks", served ? served->served_chunks.load() : 0,
            {"Chunks this node sent to other nodes of the job."});
  v.Counter("served_bytes", served ? served->served_bytes.load() : 0,
            {"Bytes this node sent to other nodes of the job.", Unit::kBytes});
  if (server != nullptr) server->VisitCounters(v);  // the "server" group
}

}  // namespace tierfs
