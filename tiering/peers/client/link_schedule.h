// What PeerClient's progress thread does next to a peer whose connection
// is up or down, decided from the link's clocks alone: pure (no transport,
// no clock of its own), so that the order of the checks is tested
// directly; PeerConnection::TickUp and TickDown carry the step out (peer_connection.cc).
#pragma once

#include <chrono>
#include <optional>

namespace tierfs {

using LinkTime = std::chrono::steady_clock::time_point;

// An up link as a tick sees it.
struct UpLinkClocks {
  bool idle = false;      // no request of its own in flight
  LinkTime last_used;     // the last Fetch or Offer (or the connection made)
  LinkTime last_heard;    // the last message from it that authenticated
  LinkTime last_ping;     // the last kPing sent to it
  LinkTime connected_at;  // this connection made
  LinkTime slow_until;    // Fetches skip it until then
  bool stalled = false;   // it answered nothing while fetches waited (CheckStall)
  bool wanted = false;    // a read wanted it and could not have it, within the last second
  std::chrono::milliseconds silence_bound{0};  // PeerLiveness::SilenceBound
};

// The client's timers (PeerClientOptions) that decide the step.
struct UpLinkTimers {
  std::chrono::milliseconds idle_close, dead_after, probe;
  // A ping when nothing came for this long (Heartbeat(dead_after)).
  std::chrono::milliseconds heartbeat;
};

// A quarter of dead_after, within [10 ms, 1 s].
std::chrono::milliseconds Heartbeat(std::chrono::milliseconds dead_after);

enum class UpStep {
  kClose,       // unused for idle_close with nothing in flight: closed by agreement (kBye)
  kDown,        // silent for dead_after: down, and dead
  kRedial,      // stalled, wanted, and silent for its silence bound: made afresh
  kPing,        // nothing heard from it nor sent to it for a heartbeat
  kProbe,       // stalled, skipped and wanted: pinged every `probe`, its answer ends the stall
  kCheckStall,  // none of these: whether its waiting fetches stalled (PeerConnection::CheckStall)
};

// The first that applies, in the order above.
UpStep NextUpStep(const UpLinkClocks& link, const UpLinkTimers& timers, LinkTime now);

// A peer that has been slow until lately and has answered nothing, not even
// a ping, for two heartbeats stays slow for one more: the time it is
// skipped until, or nothing if it is not extended.
std::optional<LinkTime> SlowExtended(const UpLinkClocks& link, std::chrono::milliseconds heartbeat,
                                     LinkTime now);

// A peer whose connection was dropped for silence (redialing) and that has
// not answered since: its failed connects are no death before it has been
// silent for dead_after, as they would not be on the connection it had.
bool SilentButNotDead(bool redialing, LinkTime last_heard, std::chrono::milliseconds dead_after,
                      LinkTime now);

// A down link as a tick sees it.
struct DownLinkClocks {
  bool dead = false;       // taken for gone already
  bool redialing = false;  // dropped for silence, not heard from since
  bool ever_up = false;
  bool left = false;    // it said it was leaving the job
  bool wanted = false;  // a read wanted it and could not have it, within the last second
  LinkTime last_heard;
  LinkTime retry_at;      // its backoff ends
  LinkTime last_attempt;  // the last connect started
};

struct DownStep {
  enum Death {
    kAlive,    // as it was
    kSilent,   // redialed and silent for dead_after: taken for gone
    kNeverUp,  // never up, and the grace since Start is over: taken for gone
  } death = kAlive;
  enum Dial {
    kWait,   // its backoff runs
    kRetry,  // its backoff is over: connect
    kProbe,  // was up, did not leave, and reads want it: connect every `probe`
  } dial = kWait;
};

// `grace_over`: the grace since the client started has passed.
DownStep NextDownStep(const DownLinkClocks& link, std::chrono::milliseconds dead_after,
                      std::chrono::milliseconds probe, bool grace_over, LinkTime now);

}  // namespace tierfs
