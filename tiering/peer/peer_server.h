// PeerServer: answers the chunk requests of the job's other nodes.
//
// A connection must open with a hello whose MUNGE credential passes
// PeerAuth::Check (same uid and gid, same job, addressed to this node)
// within `hello_timeout`; the server answers with a credential of its own.
// Until then a request is refused (kDenied) and the connection closed;
// a message that does not decode (WireStatus), a second hello, a message
// without a reply endpoint or a body where none belongs is garbage: the
// connection is cut off. Every refusal is counted.
//
// Requests of an authenticated peer go to a TaskPool of `threads` threads
// that call the ChunkProvider; the answer (kData or kError) goes back on the
// progress thread. Bounded: at most `max_in_flight` requests in the server
// (queued, being read or being sent) and `max_per_connection` per peer;
// beyond, the answer is kBusy (the asking node reads SOURCE instead).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tiering/counter_visitor.h"
#include "tiering/latency_histogram.h"
#include "tiering/peer/chunk_provider.h"
#include "tiering/peer/peer_auth.h"
#include "tiering/peer/task_pool.h"
#include "tiering/peer/ucx_worker.h"

namespace tierfs {

struct PeerServerOptions {
  std::string listen_host = "0.0.0.0";
  uint16_t port = 0;              // 0: any free port (tests); the daemon sets the job's port
  uint64_t chunk_size = 8 << 20;  // this node's; requests for another size get kBadRequest
  unsigned threads = 4;           // provider calls at once
  size_t max_in_flight = 32;      // requests queued, being read or sent; beyond: kBusy
  size_t max_per_connection = 16;
  size_t max_connections = 1024;
  std::chrono::milliseconds hello_timeout{5000};
  // A data answer the peer has not taken by then cuts the connection off,
  // so a stalled peer cannot hold the server's slots.
  std::chrono::milliseconds send_timeout{30000};
  UcxWorker::Options ucx;
};

struct PeerServerCounters {
  std::atomic<uint64_t> connections{0};           // accepted
  std::atomic<uint64_t> rejected_connections{0};  // over max_connections
  std::atomic<uint64_t> open{0};                  // gauge
  std::atomic<uint64_t> hellos{0};                // authenticated
  std::atomic<uint64_t> unauthenticated{0};       // requests before a hello: refused
  std::atomic<uint64_t> hello_timeouts{0};
  std::atomic<uint64_t> send_timeouts{0};
  std::atomic<uint64_t> garbage{0};      // undecodable or misplaced messages: cut off
  std::atomic<uint64_t> bad_version{0};  // ... of which another wire version
  std::atomic<uint64_t> stray{0};        // messages from no known connection: dropped
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> served_chunks{0}, served_bytes{0};
  std::atomic<uint64_t> busy{0};    // answered kBusy
  std::atomic<uint64_t> errors{0};  // answered another error (provider or bad chunk size)
  // Hellos refused, by AuthVerdict (kOk unused).
  std::atomic<uint64_t> refused[8]{};
  LatencyHistogram serve_latency;  // request arrival to answer sent
};

class PeerServer {
 public:
  // `auth` and `provider` must outlive the server. Throws std::runtime_error
  // if UCX cannot start.
  PeerServer(PeerAuth* auth, ChunkProvider* provider, PeerServerOptions options);
  ~PeerServer();  // Stop()

  // Listens and starts serving. The port bound, or -1 with *error.
  int Start(std::string* error);
  // Closes every connection and waits for the provider calls running. Idempotent.
  void Stop();

  uint16_t port() const { return port_; }
  const PeerServerCounters& counters() const { return counters_; }
  uint64_t refused(AuthVerdict v) const { return counters_.refused[static_cast<int>(v)].load(); }
  // The "server" group: the counters above, and bytes served per peer.
  void VisitCounters(CounterVisitor& v) const;

 private:
  struct Connection;
  struct Job;
  ucs_status_t OnMessage(const void* header, size_t header_size, void* data, size_t size,
                         const ucp_am_recv_param_t* param);
  void OnConnRequest(ucp_conn_request_h request);
  void OnHello(Connection& c, uint64_t request_id, std::string_view cred);
  void OnRequest(Connection& c, const PeerMessage& m, std::string_view path);
  // Sends a job's bytes or error to connection `conn`, if it is still there.
  void Answer(uint64_t conn, std::shared_ptr<Job> job);
  void SendError(Connection& c, uint64_t request_id, WireError error);
  // Answers `error` (as a kHelloAnswer or kError), then closes.
  void Refuse(Connection& c, uint64_t request_id, WireError error, MsgType type);
  // Garbage: counted, logged, closed.
  void CutOff(Connection& c, const char* why);
  void Drop(uint64_t id);
  // Hello and send deadlines, every 10 ms at most.
  void Tick();
  void CountServed(const std::string& peer, uint64_t bytes);

  PeerAuth* const auth_;
  ChunkProvider* const provider_;
  const PeerServerOptions options_;
  UcxWorker ucx_;
  TaskPool pool_;
  uint16_t port_ = 0;
  PeerServerCounters counters_;

  // Progress thread only.
  std::unordered_map<ucp_ep_h, std::unique_ptr<Connection>> by_ep_;
  std::unordered_map<uint64_t, Connection*> by_id_;
  uint64_t next_id_ = 1;
  size_t in_flight_ = 0;  // requests queued, being read or sent
  static constexpr size_t kMaxChecking = 8;
  size_t checking_ = 0;  // hellos being checked
  std::chrono::steady_clock::time_point next_tick_;

  struct Served {
    uint64_t chunks = 0, bytes = 0;
  };
  mutable std::mutex served_mu_;          // guards served_. A leaf lock.
  std::map<std::string, Served> served_;  // by authenticated peer name, at most max_connections

  // Spare chunk buffers, so a read does not fault in fresh pages each time.
  std::mutex spare_mu_;  // guards spare_. A leaf lock.
  std::vector<std::unique_ptr<char[]>> spare_;
  std::unique_ptr<char[]> TakeBuffer();
  void GiveBuffer(std::unique_ptr<char[]> b);
};

}  // namespace tierfs
