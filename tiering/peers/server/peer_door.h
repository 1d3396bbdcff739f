// PeerDoor: the TCP listener on the peer port, where every connection from
// another node is authenticated (peer_handshake.h) before it costs this
// node anything but a socket and a few hundred bytes.
//
// One thread, epoll, non-blocking sockets. Bounded: at most `max_pending`
// connections in their handshake and `max_per_address` from one address,
// each twice: once for connections from a port below 1024 (a root
// daemon's: no other user of its node can take those places), once for
// the others. A connection's source is its address and that class.
// A connection beyond either limit evicts the oldest one of its source
// (or, when its class is full, of the source of that class holding the
// most places) that has not sent a hello, else the oldest, so idle connections cannot keep a real
// peer out, and each has `handshake_timeout` to finish; one younger than 500 ms is not evicted (the
// newcomer is turned away instead), so a flood of short connections cannot evict a real peer while
// it does the greeting's work.
//
// Fair to every source (peer_door_sources.h): a hello waits for its MUNGE
// check in its source's queue, and the checks (two threads, a few at a
// time) are given in turn, one per source with a hello waiting, the two
// classes alternately: a flood of hellos from one address gets one check
// per turn like any other source, and a flood from unreserved ports never
// takes the turns of root daemons' connections. The greeting's puzzle
// (door_puzzle.h) is the source's own: 0 bits while it has opened no more
// than a few connections lately (a real peer connects once or twice), then
// 8 bits and 2 more each time its recent connections double, up to
// `max_puzzle_bits`; forgotten as its connections stop. A flooding source
// pays a hash search per hello; the others pay nothing.
//
// A connection that authenticates gets the server's UCX worker address and
// leaves an AcceptedSession (the peer's name and the keys) for the server
// to Take when the peer's first sealed message arrives; then the socket is
// closed; sessions not taken in `session_ttl` are dropped.
//
// Every session the door leaves also leaves a ticket (session_resumption.h):
// a connection that opens with a Resume in place of a hello is answered on
// the door's thread, without munged (peer_door_resume.cc), after the same
// puzzle; a refused one may go on with a hello.
//
// The listening socket is bound to one address (never 0.0.0.0 unless told)
// or inherited from a privileged parent (LISTEN_FDS). A port someone else
// holds is retried with backoff, up to 30 s between tries.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/executor.h"
#include "tiering/base/mutex.h"
#include "tiering/base/status.h"
#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/secure/session_resumption.h"
#include "tiering/peers/server/peer_door_sources.h"
#include "tiering/peers/transport/peer_crypto.h"

namespace tierfs {

struct PeerDoorOptions {
  std::string host = "127.0.0.1";  // the address to listen on
  uint16_t port = 0;               // 0: any free port (tests)
  int inherited_fd = -1;           // a listening socket to use instead of binding
  size_t max_pending = 1024;       // per class: a job's every node at once
  size_t max_per_address = 8;
  std::chrono::milliseconds handshake_timeout{2000};
  size_t max_sessions = 256;  // authenticated, not yet taken
  std::chrono::milliseconds session_ttl{10000};
  std::chrono::milliseconds retry_min{200}, retry_max{30000};  // binding a taken port
  unsigned max_puzzle_bits = 18;                               // at most kMaxPuzzleBits
  size_t max_tickets = kMaxTickets;                            // sessions that can be resumed
  std::chrono::seconds ticket_lifetime = kTicketLifetime;
  // False once the server cannot take sessions (its UCX worker failed):
  // a finished handshake is then closed unanswered (counted busy).
  std::function<bool()> serving;
};

struct AcceptedSession {
  uint64_t id = 0;
  std::string peer;  // the authenticated name
  SessionKeys keys;  // as the server sees them
};

struct PeerDoorCounters {
  std::atomic<uint64_t> connections{0};      // accepted sockets
  std::atomic<uint64_t> reserved_port{0};    // ... of them from a port below 1024
  std::atomic<uint64_t> evicted{0};          // closed unfinished to make room
  std::atomic<uint64_t> timeouts{0};         // no handshake by the deadline
  std::atomic<uint64_t> garbage{0};          // frames that do not decode or authenticate
  std::atomic<uint64_t> busy{0};             // hellos not checked: too many at once
  std::atomic<uint64_t> unsolved{0};         // hellos without the puzzle's solution
  std::atomic<uint64_t> turned_away{0};      // closed at once: the limits full of young ones
  std::atomic<unsigned> work_bits{0};        // gauge: the most work any source is asked now
  std::atomic<uint64_t> work_asked{0};       // greetings that asked for work
  std::atomic<uint64_t> checks{0};           // hellos given to munged to check
  std::atomic<uint64_t> reserved_checks{0};  // ... of them from a port below 1024
  std::atomic<uint64_t> authenticated{0};    // sessions from a full handshake (MUNGE)
  std::atomic<uint64_t> resumed{0};          // sessions resumed by a ticket (no MUNGE)
  std::atomic<uint64_t> resume_refused[kResumeRefusals]{};  // by ResumeRefusal
  std::atomic<uint64_t> expired_sessions{0};                // authenticated, never used
  std::atomic<uint64_t> listen_failures{0};                 // binds that failed (the port taken)
  std::atomic<uint64_t> refused[8]{};                       // hellos refused, by AuthVerdict
};

class PeerDoor {
 public:
  // `auth` must outlive the door. `worker_address`: the server's UCX worker.
  PeerDoor(const PeerAuth* auth, PeerDoorOptions options, std::string worker_address);
  ~PeerDoor();  // Stop()

  // Binds and listens now if it can, and starts the thread, which keeps
  // trying with backoff if another process holds the port (listening(),
  // port() and listen_error() tell). An error no retry can fix (a bad
  // address) is returned.
  Status Start();
  void Stop();

  bool listening() const { return listening_.load(); }
  uint16_t port() const { return port_.load(); }
  // The last reason the port could not be bound ("" once listening).
  std::string listen_error() const;

  // Takes session `id` if it is waiting and `verify` accepts its keys (the
  // first message's tag). Thread-safe; `verify` runs under a leaf lock.
  bool Take(uint64_t id, const std::function<bool(const SessionKeys&)>& verify,
            AcceptedSession* out);
  // Sessions authenticated at or after `since` and not taken yet: their
  // peers may be connecting to the server's worker right now. Thread-safe.
  size_t SessionsWaiting(std::chrono::steady_clock::time_point since) const;
  // The server's UCX worker is a new one (its transport was started
  // again): handshakes from now on name `worker_address`, and the sessions
  // not taken yet, which named the old one, are forgotten. Thread-safe.
  void SetWorkerAddress(std::string worker_address);

  const PeerDoorCounters& counters() const { return counters_; }
  void VisitCounters(CounterVisitor& v) const;

 private:
  struct Conn;
  struct Checked;
  Status Bind();  // EADDRINUSE: another process holds the port
  void Loop();
  void AcceptSome();
  using Source = DoorSources::Source;
  void Admit(int fd, Source source);
  void OnReadable(Conn& c);
  void OnChecked(Checked& r);
  // A Resume in place of a hello (peer_door_resume.cc).
  void OnResume(Conn& c);
  void VisitResumeCounters(CounterVisitor& v) const;
  // Keeps `s` for Take, sends `answer` (the bind answer or the resumed
  // frame; empty: libcrypto failed), files the session's ticket and
  // counts it in `counter`; or closes the connection, counted busy.
  void Conclude(Conn& c, AcceptedSession s, const std::string& answer,
                std::atomic<uint64_t>& counter);
  void Close(int fd);
  void Expire();
  // Gives hellos waiting in their sources' queues to the checks, in turn,
  // while fewer than a few are being checked.
  void Dispatch();
  // Takes the checks' results, then gives out more.
  void TakeChecked();

  const PeerAuth* const auth_;
  const PeerDoorOptions options_;
  PeerDoorCounters counters_;
  std::atomic<bool> listening_{false};
  std::atomic<uint16_t> port_{0};
  std::atomic<bool> quit_{false};
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  TaskPool checks_;

  // Door thread only.
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;  // by fd
  std::deque<std::pair<int, uint64_t>> order_;  // (fd, conn id) by age; may hold closed ones
  DoorSources sources_;  // places, recent connections, the hellos waiting for a check
  std::chrono::steady_clock::time_point retry_at_, pruned_at_;
  std::chrono::milliseconds backoff_{0};
  size_t checks_pending_ = 0;  // hellos submitted to checks_, results not yet taken
  uint64_t puzzle_logs_ = 0;
  TicketStore tickets_;

  std::string WorkerAddress() const;
  // guards checked_, sessions_, listen_error_ and worker_address_. A leaf lock.
  mutable Mutex mu_;
  // the server's UCX worker, as handshakes name it
  std::string worker_address_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Checked>> checked_ GUARDED_BY(mu_);  // MUNGE results for the thread
  struct Waiting {
    AcceptedSession session;
    std::chrono::steady_clock::time_point expires;
  };
  std::unordered_map<uint64_t, Waiting> sessions_ GUARDED_BY(mu_);
  std::string listen_error_ GUARDED_BY(mu_);
};

}  // namespace tierfs
