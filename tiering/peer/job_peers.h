// JobPeers: this node's place among the job's peers. It owns the MUNGE
// identity, the PeerServer (answering the others) and the PeerClient (asking
// them), and knows each chunk's home: the live peer that rendezvous hashing
// picks for it (tiering/peer/rendezvous.h). The read path and the promoter
// ask Home() on a miss and Fetch() from a remote home; a failed fetch is
// theirs to serve from SOURCE (counted here as a fallback).
//
// A peer that is not up is not live: its chunks go to their next choice,
// which may be this node (then SOURCE is read), and come back when it is up
// again. Every node computes homes alike from the same list and live set;
// two nodes with different views of who is up may both read a chunk from
// SOURCE once, never get wrong bytes (requests name path, size, mtime,
// ctime and inode).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tiering/base/counter_visitor.h"
#include "tiering/namespace/chunk_key.h"
#include "tiering/namespace/namespace.h"
#include "tiering/peer/chunk_provider.h"
#include "tiering/peer/peer_list.h"
#include "tiering/peer/rendezvous.h"

namespace tierfs {

class PeerAuth;
class PeerClient;
class PeerServer;

struct JobPeersConfig {
  std::vector<PeerEntry> peers;             // the whole job, this node included
  std::string self;                         // this node's name in `peers`
  std::string listen;                       // "" = this node's address from `peers`
  std::string job;                          // the job's identity, the same on every node
  std::string munge_socket;                 // "" = libmunge's default
  std::chrono::milliseconds timeout{5000};  // a fetch's deadline
  uint64_t chunk_size = 8 << 20;
  unsigned server_threads = 16;  // provider calls at once
  std::string ucx_tls;           // "" = UCX's choice (or UCX_TLS)
};

class JobPeers {
 public:
  // No UCX yet (the daemon may fork after). `config.self` must be listed.
  JobPeers(JobPeersConfig config, const Namespace* ns);
  ~JobPeers();  // Stop()

  // Starts listening (serving chunks from `provider`, which must outlive
  // Stop) and connecting to the others. 0, or -1 with *error: then this
  // node asks nobody and serves nobody (its chunks are read from SOURCE).
  // A port someone else holds is not an error: the server retries it (the
  // "server" counters say so) and the client starts at once.
  int Start(ChunkProvider* provider, std::string* error);
  // Stops serving and asking; waits for the provider calls running. Idempotent.
  void Stop();

  const std::string& self() const { return config_.self; }
  size_t size() const { return rendezvous_.size(); }

  // The client link of the live peer that is `key`'s home, or -1 when that
  // is this node (or nobody else is up). Lock-free; allocates the path.
  int Home(ChunkKey key) const;
  // Fetches [off, off+n) of chunk `key` (off within the chunk) from peer
  // `link` into `dest`. n, or -errno (the caller reads SOURCE: counted as a
  // fallback). Blocks until the peer answers or the timeout.
  ssize_t Fetch(int link, ChunkKey key, uint64_t off, size_t n, char* dest);
  // Asks peer `link` for the first byte of chunk `key`, so that it promotes
  // the chunk now (look-ahead for a chunk this node has no room to copy).
  // True if it answered. Not a fallback when it fails: nothing waits on it.
  bool AskAhead(int link, ChunkKey key);

  // The "peers" group: totals, then the client's and the server's figures.
  void VisitCounters(CounterVisitor& v) const;

 private:
  const JobPeersConfig config_;
  const Namespace* const ns_;
  const uint64_t chunk_size_;
  Rendezvous rendezvous_;
  int self_index_ = -1;
  std::vector<int> link_of_;  // rendezvous index -> client link (-1: this node)
  std::unique_ptr<PeerAuth> auth_;
  std::unique_ptr<PeerServer> server_;
  std::unique_ptr<PeerClient> client_;  // set once Start succeeded
  std::atomic<bool> started_{false};
  int inherited_fd_ = -1;  // a listening socket handed over at start (LISTEN_FDS)
  // The chunk as the asker's snapshot names it: [off, off+n) of it.
  ChunkRef Ref(ChunkKey key, const std::string& path, uint64_t off, size_t n) const;

  std::atomic<uint64_t> fetched_chunks_{0}, fetched_bytes_{0}, fallbacks_{0};
  std::atomic<uint64_t> asked_ahead_{0}, asked_ahead_failed_{0};
};

}  // namespace tierfs
