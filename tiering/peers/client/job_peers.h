// JobPeers: this node's place among the job's peers, as an asker. It asks
// as the PeerNode it is started with (its address for the others and its
// MUNGE identity: tiering/peers/secure/peer_node.h), which the server
// answers as too, owns the PeerClient (asking the others), and knows each
// chunk's home: the live peer that rendezvous
// hashing picks for it (tiering/peers/client/rendezvous.h). The engine's
// ChunkSource asks Home() on a miss and Fetch()es from a remote home; a
// failed fetch is its to serve from SOURCE (counted here as a fallback).
// Answering the others is the peer server's (tiering/peers/server/), run
// by the daemon's second front door (fs/peers/) as the same PeerNode.
//
// Homes are computed over the job's whole node list from the first
// second, so stage-in starts at once on every node and a node that is slow
// to start or to answer moves nothing. Only a dead peer (PeerClient: its
// transport failed, it was silent for peer_dead, or it never came up
// within the grace, 6 x peer_dead) is left out: its chunks go to their
// next choice, which may be this node, and come back when it is up again.
// A home that is not up yet, or slow, has its chunks read from SOURCE by
// whoever needs them meanwhile. Two nodes with different views of who is
// dead may both read a chunk from SOURCE once, never get wrong bytes
// (requests name path, size, mtime, ctime and inode).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/status.h"
#include "tiering/namespace/chunk_homes.h"
#include "tiering/namespace/chunk_key.h"
#include "tiering/namespace/namespace.h"
#include "tiering/peers/client/rendezvous.h"
#include "tiering/peers/config/job_peers_config.h"
#include "tiering/peers/config/peer_list.h"
#include "tiering/peers/secure/peer_node.h"
#include "tiering/peers/secure/source_ports.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {

class PeerClient;

class JobPeers final : public ChunkHomes {
 public:
  // No UCX yet (the daemon may fork after). `config.self` must be listed.
  JobPeers(JobPeersConfig config, const Namespace* ns);
  ~JobPeers() override;  // Stop()

  // Starts connecting to the others as `node` (made from config(); shared
  // with the server). An error leaves this node asking nobody (its chunks
  // are read from SOURCE).
  Status Start(std::shared_ptr<const PeerNode> node);
  // Stops asking (fetches in progress fail: their callers read SOURCE).
  // Idempotent.
  void Stop();
  bool started() const { return started_.load(std::memory_order_acquire); }

  const JobPeersConfig& config() const { return config_; }
  const std::string& self() const { return config_.self; }
  size_t size() const { return rendezvous_.size(); }

  // The client link of the peer that is `key`'s home among the peers not
  // dead, or -1 when that is this node (or this node asks nobody).
  // Lock-free; allocates the path.
  int Home(ChunkKey key) const override;
  // Fetches [off, off+n) of chunk `key` (off within the chunk) from peer
  // `link` into `dest`. n, or -errno (the caller reads SOURCE: counted as a
  // fallback). Blocks until the peer answers or the timeout. With
  // `if_resident`, -ENODATA if the peer neither holds the chunk nor is
  // promoting it: not a fallback, counted as read_here (the caller reads
  // SOURCE and offers the peer the copy).
  // With `source` (a hedge: it reads the same n bytes from SOURCE into
  // its argument), a home that has not begun to answer within its hedge
  // time (the p99 of its answers, within bounds) is raced with SOURCE:
  // n (or SOURCE's count) with *from_source set when SOURCE's bytes won;
  // they are not a fallback. PeerClient::Fetch tells the rest.
  ssize_t Fetch(int link, ChunkKey key, uint64_t off, size_t n, char* dest, bool if_resident,
                const std::function<ssize_t(char*)>& source, bool* from_source) override;
  // Offers peer `link` chunk `key`, whose n bytes (the whole chunk) are at
  // `data`, without waiting (PeerClient::Offer). False if not sent.
  bool Offer(int link, ChunkKey key, const char* data, size_t n) override;
  // Asks peer `link` for the first byte of chunk `key`, so that it promotes
  // the chunk now (look-ahead for a chunk this node has no room to copy).
  // True if it answered. Not a fallback when it fails: nothing waits on it.
  bool AskAhead(int link, ChunkKey key) override;

  // The client's transport (PeerClient::transport_failed, RestartTransport,
  // WedgeForTest); false, or an error, before a successful Start.
  bool transport_failed() const;
  Status RestartTransport();
  void WedgeForTest();

  // This node's figures as an asker, into the "peers" group: totals, then
  // the client's.
  void VisitCounters(CounterVisitor& v) const;

 private:
  const JobPeersConfig config_;
  const Namespace* const ns_;
  const uint64_t chunk_size_;
  Rendezvous rendezvous_;
  int self_index_ = -1;
  std::vector<int> link_of_;              // rendezvous index -> client link (-1: this node)
  std::shared_ptr<const PeerNode> node_;  // set by Start; its auth outlives the client
  std::unique_ptr<PeerClient> client_;    // set once Start succeeded
  std::atomic<bool> started_{false};
  std::atomic<bool> given_up_{false};  // Start failed, or Stop ran: this node asks nobody
  Status StartAsking(std::shared_ptr<const PeerNode> node);
  // The chunk as the asker's snapshot names it: [off, off+n) of it.
  ChunkRef Ref(ChunkKey key, const std::string& path, uint64_t off, size_t n) const;

  std::atomic<uint64_t> fetched_chunks_{0}, fetched_bytes_{0}, fallbacks_{0};
  std::atomic<uint64_t> asked_ahead_{0}, asked_ahead_failed_{0};
  std::atomic<uint64_t> read_here_{0}, offered_{0};
  std::atomic<uint64_t> hedged_{0}, hedge_bytes_{0};
};

}  // namespace tierfs
