// PeerConnections driven by hand: a fake transport and dialer, a clock the
// test moves, the progress thread's calls made on the test's thread. A
// connect that fails goes down and is retried after its backoff, which
// doubles; a peer never up is dead once the grace is over; over
// max_connections the least recently used idle connection closes; an up link is pinged after a
// heartbeat of silence and is down and dead after dead_after of it; a link whose waiting fetches go
// unanswered, even by a ping, ends them; one closed unused after
// idle_close; an "unknown session" answer connects again at once when
// fetches wait; a transport timeout is a slow peer, a reset a dead one;
// stopping closes every connection and ends every request.
#include "tiering/peers/client/peer_connections.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>

#include "fake_peer_transport.h"

namespace tierfs {
namespace {

using namespace std::chrono_literals;
using testing::FakePeerDialer;
using testing::FakePeerTransport;
using Clock = std::chrono::steady_clock;

PeerClientOptions Options(std::chrono::milliseconds dead_after = 10s,
                          std::chrono::milliseconds idle_close = 1800s) {
  PeerClientOptions o;
  o.peers = {PeerAddress{"b", "127.0.0.1", 1}};
  o.retry_min = 100ms;
  o.retry_max = 5s;
  o.dead_after = dead_after;
  o.idle_close = idle_close;
  return o;
}

struct Harness {
  explicit Harness(PeerClientOptions o = Options()) : options(std::move(o)) {
    connections.SetTransport(&transport);
    connections.Start();
  }

  PeerConnection& connection() { return connections.connection(0); }
  PeerLink& link() { return connections.link(0); }
  LinkState state() { return link().status.state.load(); }
  // The clock moves by `d` in ticks of 10 ms (the progress thread's
  // rounds), each followed by what it posted.
  void Advance(Clock::duration d) {
    const auto end = now + d;
    while (now < end) {
      now = std::min(end, now + 10ms);
      connections.Tick();
      transport.RunPosted();
    }
  }
  // A Fetch asks for the idle link; its handshake succeeds: up.
  void Up(uint64_t session = 7) {
    connections.Asked(connection());
    REQUIRE(state() == LinkState::kConnecting);
    Answer(session);
    REQUIRE(state() == LinkState::kUp);
  }
  // The last handshake asked for succeeds, with session `session`.
  void Answer(uint64_t session) {
    dialer.Succeed(dialer.dials.size() - 1, session);
    transport.RunPosted();
  }
  // A request sent on the link now, waiting for its answer.
  std::shared_ptr<PeerRequest> Waiting(uint64_t id) {
    auto p = std::make_shared<PeerRequest>();
    p->id = id;
    p->peer = 0;
    p->sent_at = now;
    p->deadline = now + 60s;
    p->generation = link().progress.generation;
    link().progress.pending[id] = p;
    return p;
  }
  // A read wanted the peer just now.
  void Want() { link().status.wanted_at.store(now.time_since_epoch().count()); }

  const PeerClientOptions options;
  Clock::time_point now = Clock::time_point(100h);
  FakePeerTransport transport;
  FakePeerDialer dialer;
  PeerConnections connections{options, &dialer, [this] { return now; }};
};

TEST_CASE("peer connections: a failed connect goes down and is retried after its backoff",
          "[peer]") {
  Harness h;
  h.connections.Asked(h.connection());
  REQUIRE(h.dialer.dials.size() == 1);
  CHECK(h.dialer.dials[0].request.tcp_limit == h.options.connect_timeout);  // a first connect
  h.dialer.Fail(0, HandshakeResult::kUnreachable);
  h.transport.RunPosted();
  CHECK(h.state() == LinkState::kDown);
  CHECK(h.link().status.retrying.load());
  CHECK_FALSE(h.link().status.dead.load());  // never up, within the grace
  CHECK(h.link().counters.connect_failures.load() == 1);
  CHECK(h.connections.open() == 0);

  h.Advance(90ms);  // the backoff is retry_min
  CHECK(h.dialer.dials.size() == 1);
  h.Advance(10ms);
  REQUIRE(h.dialer.dials.size() == 2);
  CHECK(h.state() == LinkState::kConnecting);
  CHECK(h.dialer.dials[1].request.tcp_limit == h.options.probe_connect);  // a retry: short

  h.dialer.Fail(1, HandshakeResult::kUnreachable);
  h.transport.RunPosted();
  h.Advance(190ms);  // doubled
  CHECK(h.dialer.dials.size() == 2);
  h.Advance(10ms);
  REQUIRE(h.dialer.dials.size() == 3);
  h.Answer(9);
  CHECK(h.state() == LinkState::kUp);
  CHECK_FALSE(h.link().status.retrying.load());
  CHECK(h.transport.connected == std::vector<std::string>{"worker-9"});
}

TEST_CASE("peer connections: a peer never up is dead only once the grace is over", "[peer]") {
  PeerClientOptions o = Options();
  o.grace = 1s;
  Harness h(o);
  h.connections.Asked(h.connection());
  h.dialer.Fail(0, HandshakeResult::kUnreachable);
  h.transport.RunPosted();
  h.Advance(90ms);  // down, its backoff running: not dead
  CHECK(h.state() == LinkState::kDown);
  CHECK_FALSE(h.link().status.dead.load());
  h.Advance(900ms);  // retried, and failed again just before the grace is over
  for (size_t i = 1; i < h.dialer.dials.size(); ++i)
    h.dialer.Fail(i, HandshakeResult::kUnreachable);
  h.transport.RunPosted();
  CHECK(h.state() == LinkState::kDown);
  CHECK_FALSE(h.link().status.dead.load());
  h.Advance(10ms);
  CHECK(h.link().status.dead.load());
}

TEST_CASE("peer connections: over max_connections the least recently used idle one closes",
          "[peer]") {
  PeerClientOptions o = Options();
  o.peers = {PeerAddress{"a", "127.0.0.1", 1}, PeerAddress{"b", "127.0.0.1", 2},
             PeerAddress{"c", "127.0.0.1", 3}};
  o.max_connections = 2;
  Harness h(o);
  PeerLink& a = h.connections.link(0);
  PeerLink& b = h.connections.link(1);
  PeerLink& c = h.connections.link(2);
  h.connections.Asked(h.connections.connection(0));
  h.Answer(1);
  h.connections.Asked(h.connections.connection(1));
  h.Answer(2);
  a.status.last_used.store((h.now + 2s).time_since_epoch().count());  // b is the older
  h.connections.Asked(h.connections.connection(2));
  CHECK(b.status.state.load() == LinkState::kIdle);  // closed by agreement
  CHECK(h.transport.Count(MsgType::kBye) == 1);
  CHECK(a.status.state.load() == LinkState::kUp);
  CHECK(c.status.state.load() == LinkState::kConnecting);
  CHECK(h.connections.open() == 2);

  // Both open ones busy: none is closed, and c's would-be connect stays idle.
  h.Answer(3);
  REQUIRE(c.status.state.load() == LinkState::kUp);
  for (PeerLink* l : {&a, &c}) {
    auto p = std::make_shared<PeerRequest>();
    p->id = 100 + l->index;
    l->progress.pending[p->id] = p;
  }
  h.connections.Asked(h.connections.connection(1));
  CHECK(b.status.state.load() == LinkState::kIdle);
  CHECK(b.status.no_slot.load() == 1);
  CHECK(h.dialer.dials.size() == 3);
}

TEST_CASE("peer connections: a handshake that never answers is given up", "[peer]") {
  Harness h;
  h.connections.Asked(h.connection());
  // Its deadline is twice connect_timeout, and half a second more for its result.
  h.Advance(2 * h.options.connect_timeout + 500ms);
  CHECK(h.state() == LinkState::kConnecting);
  h.Advance(10ms);
  CHECK(h.state() == LinkState::kDown);
  // Its late answer changes nothing.
  h.Answer(7);
  CHECK(h.state() == LinkState::kDown);
  CHECK(h.transport.connected.empty());
}

TEST_CASE("peer connections: an up link is pinged after a heartbeat of silence", "[peer]") {
  Harness h(Options(/*dead_after=*/4s));  // a heartbeat of 1 s
  h.Up();
  CHECK(h.transport.Count(MsgType::kPing) == 1);  // the session's first message
  h.Advance(990ms);
  CHECK(h.transport.Count(MsgType::kPing) == 1);
  h.Advance(10ms);
  CHECK(h.transport.Count(MsgType::kPing) == 2);
  // Its answer: heard, a round trip measured; the next ping a heartbeat on.
  h.Advance(200ms);
  h.connection().Heard();
  h.connection().OnPong();
  CHECK(h.link().progress.liveness.srtt() == 200ms);
  h.Advance(990ms);
  CHECK(h.transport.Count(MsgType::kPing) == 2);
  h.Advance(10ms);
  CHECK(h.transport.Count(MsgType::kPing) == 3);
  CHECK(h.state() == LinkState::kUp);
}

TEST_CASE("peer connections: an up link silent for dead_after is down and dead", "[peer]") {
  Harness h(Options(/*dead_after=*/2s));
  h.Up();
  const PeerEndpoint ep = h.link().progress.ep;
  h.Advance(1990ms);  // pinged, never answered
  CHECK(h.transport.Count(MsgType::kPing) > 1);
  CHECK(h.state() == LinkState::kUp);
  CHECK_FALSE(h.link().status.dead.load());
  h.Advance(10ms);
  CHECK(h.state() == LinkState::kDown);
  CHECK(h.link().status.dead.load());
  CHECK(h.transport.Closed(ep));
  CHECK(h.link().counters.downs.load() == 1);
  CHECK(h.connections.BySession(7) == nullptr);
  // Retried after its backoff; up again, it is a home again.
  h.Advance(100ms);
  REQUIRE(h.dialer.dials.size() == 2);
  h.Answer(8);
  CHECK(h.state() == LinkState::kUp);
  CHECK_FALSE(h.link().status.dead.load());
}

TEST_CASE("peer connections: waiting fetches of a peer that answers nothing end", "[peer]") {
  Harness h;  // dead_after 10 s: a stall time of 250 ms
  h.Up();
  h.Advance(10ms);
  auto p = h.Waiting(1);
  // Half the stall time with nothing heard since it was sent: a probe.
  h.Advance(120ms);
  CHECK(h.transport.Count(MsgType::kPing) == 1);
  h.Advance(10ms);
  CHECK(h.transport.Count(MsgType::kPing) == 2);
  // The stall time after the probe, unanswered: the fetch ends, the peer is slow.
  h.Advance(240ms);
  CHECK(p->phase == PeerRequest::kWaiting);
  h.Advance(10ms);
  CHECK(p->phase == PeerRequest::kDone);
  CHECK(p->result == -ETIMEDOUT);
  CHECK(h.link().progress.stalled);
  CHECK(h.link().counters.stalls.load() == 1);
  CHECK(h.link().status.slow_until.load() > h.now.time_since_epoch().count());
  CHECK(h.state() == LinkState::kUp);  // slow, not down
  CHECK_FALSE(h.link().status.dead.load());
  // It answers: no longer stalled nor slow.
  h.connection().Heard();
  CHECK_FALSE(h.link().progress.stalled);
  CHECK(h.link().status.slow_until.load() == 0);
}

TEST_CASE("peer connections: waiting fetches of a peer that answers pings wait", "[peer]") {
  Harness h;
  h.Up();
  h.Advance(10ms);
  auto p = h.Waiting(1);
  h.Advance(130ms);  // the probe
  REQUIRE(h.transport.Count(MsgType::kPing) == 2);
  h.connection().Heard();  // its answer: working on it
  h.Advance(900ms);
  CHECK(p->phase == PeerRequest::kWaiting);
  CHECK(h.link().counters.stalls.load() == 0);
}

TEST_CASE("peer connections: a stalled peer silent while wanted is connected afresh", "[peer]") {
  Harness h;
  h.Up();
  h.Advance(10ms);
  h.Waiting(1);
  h.Advance(380ms);  // stalled
  REQUIRE(h.link().progress.stalled);
  // Its silence bound (1 s at least) since it was last heard, wanted by reads.
  h.Want();
  h.Advance(600ms);
  h.Want();
  CHECK(h.state() == LinkState::kUp);
  h.Advance(20ms);
  CHECK(h.link().counters.reconnects_after_silence.load() == 1);
  CHECK(h.link().progress.redialing);
  CHECK_FALSE(h.link().status.dead.load());  // not before dead_after of silence
  CHECK(h.dialer.dials.size() == 2);         // made again at once
}

TEST_CASE("peer connections: an unused link is closed after idle_close", "[peer]") {
  Harness h(Options(/*dead_after=*/10s, /*idle_close=*/1s));
  h.Up();
  const PeerEndpoint ep = h.link().progress.ep;
  h.Advance(990ms);
  CHECK(h.state() == LinkState::kUp);
  h.Advance(10ms);
  CHECK(h.state() == LinkState::kIdle);
  CHECK(h.transport.Count(MsgType::kBye) == 1);
  CHECK(h.transport.Closed(ep));  // once the kBye is out
  CHECK(h.link().counters.closed_idle.load() == 1);
  CHECK_FALSE(h.link().status.dead.load());
  CHECK(h.connections.open() == 0);
  // Idle stays idle: connected again only when next asked.
  h.Advance(10s);
  CHECK(h.dialer.dials.size() == 1);
}

TEST_CASE("peer connections: a link with fetches in flight is not closed as unused", "[peer]") {
  Harness h(Options(/*dead_after=*/10s, /*idle_close=*/1s));
  h.Up();
  h.Waiting(1);
  h.connection().Heard();
  h.Advance(1s);
  CHECK(h.state() == LinkState::kUp);
  CHECK(h.transport.Count(MsgType::kBye) == 0);
}

TEST_CASE("peer connections: an unknown session connects again at once if fetches wait", "[peer]") {
  Harness h;
  h.Up();
  const PeerEndpoint ep = h.link().progress.ep;
  auto p = h.Waiting(1);
  h.connection().Forgotten();
  CHECK(p->phase == PeerRequest::kDone);
  CHECK(p->result == -ECONNRESET);  // its caller asks again on the new connection
  CHECK(h.transport.Closed(ep));
  CHECK(h.state() == LinkState::kConnecting);
  CHECK(h.dialer.dials.size() == 2);
  CHECK(h.link().counters.resets.load() == 1);
  CHECK_FALSE(h.link().status.dead.load());

  // Told so with nothing waiting (a keep-alive's answer): idle until asked.
  h.Answer(8);
  REQUIRE(h.state() == LinkState::kUp);
  h.connection().Forgotten();
  CHECK(h.state() == LinkState::kIdle);
  CHECK(h.dialer.dials.size() == 2);
}

TEST_CASE("peer connections: a transport timeout is a slow peer, a reset a dead one", "[peer]") {
  Harness h;
  h.Up();
  h.connections.OnEndpointError(h.link().progress.ep, /*timed_out=*/true, "timed out");
  CHECK(h.state() == LinkState::kDown);
  CHECK_FALSE(h.link().status.dead.load());
  h.Advance(100ms);
  h.Answer(8);
  REQUIRE(h.state() == LinkState::kUp);
  h.connections.OnEndpointError(h.link().progress.ep, /*timed_out=*/false, "reset");
  CHECK(h.state() == LinkState::kDown);
  CHECK(h.link().status.dead.load());
  // An endpoint it no longer uses changes nothing.
  h.connections.OnEndpointError(h.link().progress.ep, false, "reset");
  CHECK(h.link().counters.downs.load() == 2);
}

TEST_CASE("peer connections: stopping closes every connection and ends every request", "[peer]") {
  Harness h;
  h.Up();
  auto waiting = h.Waiting(1);
  auto receiving = h.Waiting(2);
  receiving->phase = PeerRequest::kReceiving;  // its transfer ends with the transport
  REQUIRE_FALSE(h.connections.SetStopped());
  h.transport.Stop([&] { h.connections.Shutdown(); }, 1s, nullptr);
  CHECK(h.transport.Count(MsgType::kBye) == 1);
  CHECK(h.state() == LinkState::kDown);
  CHECK(waiting->phase == PeerRequest::kDone);
  CHECK(waiting->result == -EHOSTDOWN);
  CHECK(receiving->phase == PeerRequest::kReceiving);
  // The progress thread has ended: what is left ends -ESHUTDOWN.
  h.connections.EndAll(-ESHUTDOWN);
  CHECK(receiving->phase == PeerRequest::kDone);
  CHECK(receiving->result == -ESHUTDOWN);
  CHECK(h.link().progress.pending.empty());
  // Stopped: no tick connects it, and a second stop is no stop.
  h.Advance(10s);
  CHECK(h.dialer.dials.size() == 1);
  CHECK(h.connections.SetStopped());
}

}  // namespace
}  // namespace tierfs
