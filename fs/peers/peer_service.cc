#include "fs/peers/peer_service.h"

#include <algorithm>
#include <cstdint>

namespace tierfs {

Result<std::unique_ptr<PeerService>> PeerService::Start(JobPeers* peers, const Namespace* ns,
                                                        ReadPath* reads) {
  if (Status s = peers->Start(); !s.ok()) return s;
  const JobPeersConfig& config = peers->config();
  PeerServerOptions so;
  so.listen_host = peers->listen_host();
  so.port = peers->listen_port();
  so.inherited_fd = peers->TakeInheritedListenFd();
  so.ucx.net_devices = peers->net_device();
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
  std::unique_ptr<PeerService> service(new PeerService(peers, ns, reads));
  auto server = PeerServer::Make(peers->auth(), &service->reader_, so);
  if (!server.ok()) return server.status();
  service->server_ = std::move(server).value();
  // The door's errors name the address ("cannot listen on HOST:PORT: ...").
  if (Status s = service->server_->Start(); !s.ok()) return s;
  return service;
}

PeerService::~PeerService() { Stop(); }

void PeerService::Stop() {
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
