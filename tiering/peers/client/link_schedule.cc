#include "tiering/peers/client/link_schedule.h"

#include <algorithm>

namespace tierfs {

using std::chrono::milliseconds;

milliseconds Heartbeat(milliseconds dead_after) {
  return std::clamp<milliseconds>(dead_after / 4, milliseconds(10), milliseconds(1000));
}

UpStep NextUpStep(const UpLinkClocks& link, const UpLinkTimers& timers, LinkTime now) {
  if (link.idle && now - link.last_used >= timers.idle_close) return UpStep::kClose;
  if (now - link.last_heard >= timers.dead_after) return UpStep::kDown;
  // Silence counts from its last answer, or from this connection if it
  // was made since (a new connection's handshake is not an answer).
  if (link.stalled && link.wanted &&
      now - std::max(link.last_heard, link.connected_at) >= link.silence_bound) {
    return UpStep::kRedial;
  }
  if (now - link.last_heard >= timers.heartbeat && now - link.last_ping >= timers.heartbeat) {
    return UpStep::kPing;
  }
  // Not once fetches wait for it again: CheckStall's own probe does.
  if (link.stalled && now < link.slow_until && link.wanted &&
      now - link.last_ping >= timers.probe) {
    return UpStep::kProbe;
  }
  return UpStep::kCheckStall;
}

std::optional<LinkTime> SlowExtended(const UpLinkClocks& link, milliseconds heartbeat,
                                     LinkTime now) {
  if (now >= link.slow_until && now - link.slow_until < heartbeat &&
      now - link.last_heard > 2 * heartbeat) {
    return now + heartbeat;
  }
  return std::nullopt;
}

bool SilentButNotDead(bool redialing, LinkTime last_heard, milliseconds dead_after, LinkTime now) {
  return redialing && now - last_heard < dead_after;
}

DownStep NextDownStep(const DownLinkClocks& link, milliseconds dead_after, milliseconds probe,
                      bool grace_over, LinkTime now) {
  DownStep step;
  if (!link.dead && link.redialing &&
      !SilentButNotDead(link.redialing, link.last_heard, dead_after, now)) {
    step.death = DownStep::kSilent;
  } else if (!link.dead && !link.ever_up && grace_over) {
    step.death = DownStep::kNeverUp;
  }
  if (now >= link.retry_at) {
    step.dial = DownStep::kRetry;
  } else if (link.ever_up && !link.left && link.wanted && now - link.last_attempt >= probe) {
    // Cut off, and reads want it: asked again as soon as it answers, not
    // at the end of a backoff of up to retry_max.
    step.dial = DownStep::kProbe;
  }
  return step;
}

}  // namespace tierfs
