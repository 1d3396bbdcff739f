// PeerService: the daemon's second front door, beside the FUSE one. The
// job's other nodes come in here: a PeerServer listening on this node's
// address from the peer list (JobPeers found it and holds the MUNGE
// identity), answering each request through the local read path
// (PeerChunkReader): from a tier, from a promotion in flight, or promoted
// from SOURCE first, since the asker believes this node is the chunk's home.
//
// Start it after the daemon has forked and the store has started; stop it
// before the store shuts down (its requests read through the store).
#pragma once

#include <memory>

#include "fs/peers/peer_chunk_reader.h"
#include "prefetch/engine/read_path.h"
#include "tiering/base/counter_visitor.h"
#include "tiering/base/status.h"
#include "tiering/peer/job_peers.h"
#include "tiering/peer_server/peer_server.h"

namespace tierfs {

class PeerService {
 public:
  // Serves the chunks of `ns` through `reads` to the peers of `peers`,
  // which must have started. All three must outlive the service. A port
  // another process holds is not an error: the server retries it (the
  // "server" counters say so).
  static Result<std::unique_ptr<PeerService>> Start(JobPeers* peers, const Namespace* ns,
                                                    ReadPath* reads);
  ~PeerService();  // Stop()
  // Stops listening, closes every connection and waits for the requests
  // being read. Idempotent.
  void Stop();

  const PeerServer& server() const { return *server_; }
  // This node's figures as a server, into the "peers" group: whether it
  // serves, what it served, and the "server" group. With no service
  // (null), the same names at zero.
  static void VisitCounters(const PeerService* service, CounterVisitor& v);

 private:
  PeerService(const Namespace* ns, ReadPath* reads) : reader_(ns, reads) {}
  PeerChunkReader reader_;
  std::unique_ptr<PeerServer> server_;
};

}  // namespace tierfs
