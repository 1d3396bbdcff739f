// PeerService: the daemon's second front door, beside the FUSE one, and
// the one owner of the peers' start-up. Start makes this node's PeerNode
// (its address and MUNGE identity) once, starts asking as it (JobPeers and
// its client), then answering as it: a PeerServer listening on its
// address, answering each request through the local read path
// (PeerChunkReader): from a tier, from a promotion in flight, or promoted
// from SOURCE first, since the asker believes this node is the chunk's
// home. Stop ends them in the reverse order.
//
// A side (asking or serving) whose UCX failed is started again by a
// TransportWatch (tiering/peers/transport/transport_watch.h), within bounds.
// Tests may arm a way to make both fail as UCX's contained abort does:
// TIERFS_TEST_PEER_TRANSPORT_FAILURE=SIGUSR2 in the daemon's environment at
// start, then SIGUSR2 (only the daemon's user, or root, may send it: no way
// in for anyone else). Without it, SIGUSR2 does what it always did.
//
// Start it after the daemon has forked and the store has started; stop it
// before the store shuts down (its requests read through the store).
#pragma once

#include <memory>
#include <utility>

#include "fs/peers/peer_chunk_reader.h"
#include "tiering/base/counter_visitor.h"
#include "tiering/base/status.h"
#include "tiering/engine/read_path.h"
#include "tiering/peers/client/job_peers.h"
#include "tiering/peers/server/peer_server.h"
#include "tiering/peers/transport/transport_watch.h"

namespace tierfs {

class PeerService {
 public:
  // Starts asking `peers` (built, not started), then serves them the
  // chunks of `ns` through `reads`. All three must outlive the service. If
  // either cannot start, this node neither asks nor serves (a node the
  // others cannot reach is not live to them, and should not count itself
  // so), and the error says why. A port another process holds is not an
  // error: the server retries it (the "server" counters say so).
  // `listener`: a listening socket the daemon was handed for the job's port
  // (fs/mount/inherited_listener.h), or -1 to bind the port itself; the
  // service owns it from here, failed or not.
  static Result<std::unique_ptr<PeerService>> Start(JobPeers* peers, const Namespace* ns,
                                                    ReadPath* reads, int listener = -1);
  ~PeerService();  // Stop()
  // Stops listening, closes every connection and waits for the requests
  // being read, then stops asking (fetches in progress read SOURCE).
  // Idempotent.
  void Stop();

  const PeerServer& server() const { return *server_; }
  // This node's figures as a server, into the "peers" group: whether it
  // serves, what it served, and the "server" group. With no service
  // (null), the same names at zero.
  static void VisitCounters(const PeerService* service, CounterVisitor& v);

 private:
  PeerService(JobPeers* peers, const Namespace* ns, ReadPath* reads,
              std::shared_ptr<const PeerNode> node)
      : peers_(peers), node_(std::move(node)), reader_(ns, reads) {}
  JobPeers* const peers_;
  const std::shared_ptr<const PeerNode> node_;  // the server's identity (and the client's)
  PeerChunkReader reader_;
  std::unique_ptr<PeerServer> server_;
  std::unique_ptr<TransportWatch> watch_;
  // The tests' hook (above): armed at start, fired by the signal.
  void ArmTestHook();
  bool test_hook_ = false;
};

}  // namespace tierfs
