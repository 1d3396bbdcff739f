// DoorSources: the door's bookkeeping per source, without sockets (the
// door, peer_door.h, does those). A source is where connections come from:
// an IPv4 address and whether the port is below 1024 (a root daemon's
// class: on a node that keeps ip_unprivileged_port_start at 1024, no other
// user can open those). For each source it keeps
//   - the places its connections hold (at most `max_per_source`, and
//     `max_pending` for all sources of a class);
//   - its recent connections, a count that decays by half every 1.4 s
//     (e^-t/2s), and from it the puzzle its next greeting asks for: none
//     up to kFreeConnections, then 8 bits and 2 more each time the count
//     doubles, up to `max_bits`. A real peer opens one or two connections
//     to a door; a flood's count stays high for as long as it floods;
//   - its hellos waiting for a MUNGE check, in arrival order. Next() gives
//     them out in turn: one hello per source with a hello waiting, round
//     robin, and when both classes wait, reserved ports get
//     kReservedTurns turns for each of the other's: one source gets one
//     check per turn however many hellos it sends, and unreserved ports
//     (any user of a node) get at most a quarter of the checks while root
//     daemons' hellos wait.
// Sources with nothing open and a forgotten count are dropped (Prune).
// Not thread-safe: the door's thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>

namespace tierfs {

class DoorSources {
 public:
  using Clock = std::chrono::steady_clock;

  struct Source {
    uint32_t address = 0;   // IPv4, host order
    bool reserved = false;  // the port is below 1024
    uint64_t key() const { return uint64_t{address} << 1 | (reserved ? 1 : 0); }
  };
  // A hello waiting for its check: the door's connection (fd and id).
  struct HelloTicket {
    int fd = -1;
    uint64_t conn = 0;
  };
  struct Options {
    size_t max_per_source = 8;
    size_t max_pending = 64;  // per class
    unsigned max_bits = 18;
  };

  // Recent connections a source may open before its greetings ask for work.
  static constexpr double kFreeConnections = 8;

  explicit DoorSources(Options options) : options_(options) {}

  // A connection from `source` came at `now`: counted in its recent
  // connections. The puzzle bits its greeting is to ask for; `started`
  // (if given): the source was asked for none before.
  unsigned Arrived(Source source, Clock::time_point now, bool* started = nullptr);
  // The bits a source of `recent` connections is asked for.
  unsigned BitsFor(double recent) const;
  double RecentCap() const;  // the most a source's recent count may reach

  // Places: free for `source` (its own, and its class's)?
  bool SourceFull(Source source) const;
  bool ClassFull(bool reserved) const { return pending_[reserved] >= options_.max_pending; }
  // The source of class `reserved` that holds the most places.
  Source Heaviest(bool reserved) const;
  void Hold(Source source);
  void Release(Source source);

  // The check queue. `ticket` waits (its source holds a place for it).
  void Wait(Source source, HelloTicket ticket);
  // Drops `conn` from its source's queue (closed while waiting).
  void Forget(Source source, uint64_t conn);
  // The next hello to check, in turn; false when none waits.
  bool Next(HelloTicket* ticket, bool* reserved);
  size_t waiting() const { return waiting_; }

  // Drops forgotten sources; the most bits any source is asked for now.
  unsigned Prune(Clock::time_point now);
  size_t size() const { return sources_.size(); }

 private:
  struct State {
    size_t places = 0;
    double recent = 0;  // connections, decayed to `seen`
    Clock::time_point seen;
    std::deque<HelloTicket> waiting;
    bool in_turn = false;  // its key is in turns_[reserved]
    bool asked = false;    // its greetings ask for work
  };
  static double Decayed(const State& s, Clock::time_point now);

  const Options options_;
  std::unordered_map<uint64_t, State> sources_;  // by Source::key()
  size_t pending_[2] = {0, 0};                   // places held, by Source::reserved
  std::deque<uint64_t> turns_[2];                // sources with hellos waiting, by class
  static constexpr unsigned kReservedTurns = 3;  // per unreserved turn, when both wait
  unsigned reserved_run_ = 0;                    // reserved turns given in a row
  size_t waiting_ = 0;
};

}  // namespace tierfs
