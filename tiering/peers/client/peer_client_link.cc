// PeerClient: the lifecycle of the connection to each peer (idle,
// connecting, up, down), its heartbeats, on the progress thread; the
// handshake on the pool.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tiering/base/log.h"
#include "tiering/peers/client/link_schedule.h"
#include "tiering/peers/client/peer_client.h"
#include "tiering/peers/client/peer_link.h"
#include "tiering/peers/secure/peer_handshake.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

long long Ms(Clock::duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

}  // namespace

void PeerClient::Tick() {
  const auto now = Clock::now();
  if (now < next_tick_ || stopped_.load()) return;
  next_tick_ = now + milliseconds(10);
  // A ping when nothing came for a heartbeat: a quarter of dead_after, at most 1 s.
  const auto heartbeat = Heartbeat(options_.dead_after);
  const UpLinkTimers timers{options_.idle_close, options_.dead_after, options_.probe, heartbeat};
  const bool grace_over = now - started_at_ >= options_.grace;
  for (auto& lp : links_) {
    Link& l = *lp;
    switch (l.state.load()) {
      case kConnecting:
        // The handshake's own deadline has passed and its result is lost.
        if (now > l.deadline + milliseconds(500))
          Down(l, "no handshake in time", (grace_over || l.ever_up) && !SilentButNotDead(l, now));
        break;
      case kDown: {
        const DownStep step =
            NextDownStep(DownClocks(l, now), options_.dead_after, options_.probe, grace_over, now);
        if (step.death == DownStep::kSilent) {
          l.dead = true;
          l.redialing = false;  // its next connection is heard when made
          l.counters.downs++;
          TIERFS_LOG(kWarning,
                     "peer {} is down (its chunks are kept by others meanwhile): "
                     "silent for {} ms",
                     l.address.name, Ms(now - l.last_heard));
        } else if (step.death == DownStep::kNeverUp) {
          l.dead = true;
          TIERFS_LOG(kWarning, "peer {} has not come up in {} s: its chunks are kept by others",
                     l.address.name, Ms(options_.grace) / 1000);
        }
        if (step.dial == DownStep::kProbe) l.counters.probes++;
        if (step.dial != DownStep::kWait) Connect(l);
        break;
      }
      case kUp: {
        const UpStep step = NextUpStep(UpClocks(l, now), timers, now);
        switch (step) {
          case UpStep::kClose:
            Close(l);
            break;
          case UpStep::kDown:
            Down(l, "silent for " + std::to_string(Ms(now - l.last_heard)) + " ms", /*dead=*/true);
            break;
          case UpStep::kRedial:
            Redial(l, now);  // down: made afresh at the next tick
            break;
          case UpStep::kPing:
            Ping(l);
            break;
          case UpStep::kProbe:  // its first answer ends the stall
            l.counters.probes++;
            Ping(l);
            break;
          case UpStep::kCheckStall:
            CheckStall(l, now);
            break;
        }
        if (step == UpStep::kRedial) break;
        EndAbandoned(l, now);
        // Slow, and has not answered a ping since: stays slow.
        if (auto until = SlowExtended(UpClocks(l, now), heartbeat, now)) {
          l.slow_until.store(until->time_since_epoch().count());
        }
        break;
      }
      default:
        break;
    }
  }
}

DownLinkClocks PeerClient::DownClocks(const Link& l, Clock::time_point now) {
  DownLinkClocks c;
  c.dead = l.dead.load();
  c.redialing = l.redialing;
  c.ever_up = l.ever_up;
  c.left = l.left;
  c.wanted = Wanted(l, now);
  c.last_heard = l.last_heard;
  c.retry_at = l.retry_at;
  c.last_attempt = l.last_attempt;
  return c;
}

UpLinkClocks PeerClient::UpClocks(const Link& l, Clock::time_point now) {
  const auto at = [](int64_t ns) { return Clock::time_point(Clock::duration(ns)); };
  UpLinkClocks c;
  c.idle = l.pending.empty();
  c.last_used = at(l.last_used.load());
  c.last_heard = l.last_heard;
  c.last_ping = l.last_ping;
  c.connected_at = l.connected_at;
  c.slow_until = at(l.slow_until.load());
  c.stalled = l.stalled;
  c.wanted = Wanted(l, now);
  c.silence_bound = l.liveness.SilenceBound();
  return c;
}

void PeerClient::Ping(Link& l) {
  WireHeader h;
  l.ping_id = next_request_++;
  size_t n =
      EncodeBare(MsgType::kPing, WireIds{l.ping_id, l.crypto->session, l.crypto->next_seq++}, &h);
  l.last_ping = Clock::now();
  if (!SealWire(l.crypto->keys.send, &h, n, nullptr, 0, nullptr)) return;
  ucx()->Send(l.ep, kPeerAmId, h, n, nullptr, 0, UCP_AM_SEND_FLAG_REPLY, [](ucs_status_t) {});
}

// The handshake blocks (TCP, munged): it runs on the pool, bounded by the
// connect timeout; the endpoint is made back on the progress thread. At
// most max_connections are open: beyond, the least recently used one
// with nothing in flight is closed first; if none can be, this one stays
// idle and its fetches read SOURCE (it is connected when next needed).
void PeerClient::Connect(Link& l) {
  if (open_.load() >= options_.max_connections) {
    Link* lru = nullptr;
    for (auto& o : links_) {
      if (o->state.load() == kUp && o->pending.empty() &&
          (lru == nullptr || o->last_used.load() < lru->last_used.load())) {
        lru = o.get();
      }
    }
    if (lru == nullptr) {  // stays idle (not retried unasked); its waiters read SOURCE
      ++l.no_slot;
      Signal(l);
      return;
    }
    Close(*lru);
  }
  l.state = kConnecting;
  ++open_;
  uint64_t generation = ++l.generation;
  l.last_attempt = Clock::now();
  // A retry's TCP connect is short: one started while the peer was cut
  // off must not hold the next until a SYN retransmission seconds later.
  const auto tcp_limit = l.retrying.load() ? options_.probe_connect : options_.connect_timeout;
  // The handshake has connect_timeout from when a thread takes it; waiting
  // for one (hundreds of peers asked at an epoch's start) may take as long
  // again. One that waited too long failed here, not there: not a death.
  const auto queued_at = Clock::now();
  l.deadline = queued_at + 2 * options_.connect_timeout;
  size_t index = l.index;
  // A ticket is offered once: whatever this attempt comes to, it is spent
  // (unless no connection was made: then it never left this node, and it
  // is kept for the next attempt, so that retries through a cut resume).
  std::optional<ResumeTicket> ticket = std::move(l.ticket);
  l.ticket.reset();
  bool queued =
      pool_.Submit([this, index, generation, queued_at, tcp_limit, address = l.address, ticket] {
        auto session = std::make_shared<ClientSession>();
        std::optional<ResumeTicket> unsent = ticket;
        HandshakeResult r = HandshakeResult::kLocal;
        std::string error;
        const auto start = Clock::now();
        const auto deadline =
            std::min(start + options_.connect_timeout, queued_at + 2 * options_.connect_timeout);
        if (start - queued_at >= options_.connect_timeout) {
          error = "too many connections being made at once here";
        } else if (Result<int> fd =
                       ConnectTcp(address.host, address.port, std::min(deadline, start + tcp_limit),
                                  options_.source_port);
                   !fd.ok()) {
          r = HandshakeResult::kUnreachable;
          error = fd.status().message();
        } else {
          unsent.reset();
          Result<ClientSession> made =
              RunClientHandshake(*fd, *auth_, address.name, deadline, ticket ? &*ticket : nullptr);
          ::close(*fd);
          r = HandshakeFailure(made.status());
          if (made.ok())
            *session = std::move(*made);
          else
            error = made.status().message();
        }
        ucx()->Post([this, index, generation, r, session, error, unsent]() mutable {
          Link& l = *links_[index];
          if (generation != l.generation || l.state.load() != kConnecting) return;
          if (stopped_.load())
            return;  // shutting down: no new endpoint (Stop's close_all downs it)
          if (unsent && !l.ticket) l.ticket = std::move(unsent);
          const bool failure_is_death =
              r != HandshakeResult::kLocal &&
              (l.ever_up || Clock::now() - started_at_ >= options_.grace) &&
              !SilentButNotDead(l, Clock::now());
          if (r != HandshakeResult::kOk) {
            if (r == HandshakeResult::kRefused || r == HandshakeResult::kBadPeer) {
              l.counters.refused++;
              TIERFS_LOG(kWarning, "peer {}: {}", l.address.name, error);
              Down(l, error, /*dead=*/true);
              return;
            }
            if (r == HandshakeResult::kGarbage) l.counters.garbage++;
            Down(l, error, failure_is_death);
            return;
          }
          if (by_session_.count(session->session) != 0) {
            Down(l, "a session id already in use", failure_is_death);
            return;
          }
          Result<ucp_ep_h> ep = ucx()->Connect(session->worker_address);
          if (!ep.ok()) {
            Down(l, "cannot reach its worker: " + ep.status().message(), failure_is_death);
            return;
          }
          l.ep = *ep;
          by_ep_[l.ep] = &l;
          l.crypto = std::make_shared<LinkCrypto>();
          l.crypto->keys = session->keys;
          l.crypto->session = session->session;
          by_session_[session->session] = &l;
          l.ticket = session->ticket;
          if (session->resumed) l.counters.resumed++;
          if (session->refused) l.counters.resume_refused++;
          l.state = kUp;
          l.retrying = false;
          l.dead = false;
          l.ever_up = true;
          l.left = false;
          const auto up_at = Clock::now();
          l.connected_at = up_at;
          // Made afresh after a silence: heard, and asked again, once it
          // answers this connection's first ping (its door may answer while
          // its worker does not), so dead_after still counts from its last
          // answer.
          if (!l.redialing) {
            l.last_heard = up_at;
            EndStall(l);
          }
          l.answered = false;
          l.counters.connect_us +=
              static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        up_at - (l.deadline - 2 * options_.connect_timeout))
                                        .count());
          // Made now: used now (idle_close counts from here, not from its last use).
          l.last_used.store(std::max(l.last_used.load(), up_at.time_since_epoch().count()));
          l.counters.ups++;
          // The session's first message: the server holds it from now on,
          // however long this node then stays quiet.
          Ping(l);
          if (l.redialing)  // made afresh after a silence: its stall was logged
            TIERFS_LOG(kDebug, "peer {} is up again", l.address.name);
          else
            TIERFS_LOG(kInfo, "peer {} is up", l.address.name);
          Signal(l);
        });
      });
  if (!queued) Down(l, "too much to do", false);
}

// Forgets the connection's endpoint and keys, and ends its requests that
// are not receiving (a receive ends when UCX purges the closed endpoint).
// Returns the state it was in.
int PeerClient::Forget(Link& l, int next, int error) {
  int was = l.state.load();
  if (l.ep != nullptr) {
    by_ep_.erase(l.ep);
    ucx()->Close(l.ep);  // ends its sends and receives
    l.ep = nullptr;
  }
  if (l.crypto) {
    by_session_.erase(l.crypto->session);
    l.crypto.reset();
  }
  if (was == kUp || was == kConnecting) --open_;
  l.state = next;
  ++l.generation;
  EndWaiting(l, error);
  Signal(l);
  return was;
}

void PeerClient::Close(Link& l) {
  if (l.state.load() != kUp) return;
  WireHeader h;
  size_t n = EncodeBare(MsgType::kBye, WireIds{0, l.crypto->session, l.crypto->next_seq++}, &h);
  if (SealWire(l.crypto->keys.send, &h, n, nullptr, 0, nullptr)) {
    // The endpoint closes once the kBye is out (a forced close could drop it).
    ucp_ep_h ep = l.ep;
    by_ep_.erase(ep);
    l.ep = nullptr;
    ucx()->Send(ep, kPeerAmId, h, n, nullptr, 0, 0, [this, ep](ucs_status_t) { ucx()->Close(ep); });
  }
  l.counters.closed_idle++;
  Forget(l, kIdle);
  TIERFS_LOG(kDebug, "peer {}: connection closed, unused", l.address.name);
}

// One line for the whole job at its end, rather than one per peer: at
// 1,024 nodes a job's end would otherwise log a thousand transport errors
// on every node. Progress thread.
void PeerClient::LogEnd() {
  size_t up = 0, left = 0, lost = 0, never = 0;
  for (const auto& l : links_) {
    if (l->state.load() == kUp || l->state.load() == kIdle) {
      up += l->ever_up;
      never += !l->ever_up;
    } else if (l->left) {
      ++left;
    } else if (l->ever_up) {
      ++lost;
    } else {
      ++never;
    }
  }
  TIERFS_LOG(kInfo,
             "peers at the end: {} left the job, {} lost without a word, {} still there, {} never "
             "reached (of {})",
             left, lost, up, never, links_.size());
}

// Its server is stopping: no warning, no transport error to wait for.
// Gone (its chunks go elsewhere), retried only at the longest backoff, in
// case its node mounts again within the job.
void PeerClient::Leaving(Link& l) {
  l.counters.left++;
  Forget(l, kDown, -ECONNRESET);
  l.left = true;
  l.dead = true;
  l.redialing = false;
  l.retrying = true;
  l.backoff = options_.retry_max;
  l.retry_at = Clock::now() + options_.retry_max;
  TIERFS_LOG(kDebug, "peer {} is leaving the job", l.address.name);
}

void PeerClient::Down(Link& l, const std::string& why, bool dead) {
  const int was = Forget(l, kDown);
  l.retrying = true;
  l.dead = dead;
  // Taken for gone: its next connection is heard when made (else, made
  // after dead_after of silence, it would be down again before its first
  // answer could come).
  if (dead) l.redialing = false;
  l.retry_at = Clock::now() + l.backoff;
  l.backoff = std::min(l.backoff * 2, options_.retry_max);
  if (stopped_.load()) {
    // shutting down: nothing to say
  } else if (was == kUp) {
    l.counters.downs++;
    TIERFS_LOG(kWarning, "peer {} is down{}: {}; retrying in {} ms", l.address.name,
               dead ? " (its chunks are kept by others meanwhile)" : "", why,
               Ms(l.retry_at - Clock::now()));
  } else if (was == kConnecting) {
    l.counters.connect_failures++;
    TIERFS_LOG(kDebug, "peer {}: no connection: {}", l.address.name, why);
  }
}

}  // namespace tierfs
