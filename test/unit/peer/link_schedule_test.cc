// The next step of an up link from its clocks: closed when unused, down
// when silent for dead_after, made afresh when stalled, wanted and silent
// for its silence bound, pinged on a heartbeat or as a probe, else checked
// for a stall; the checks in that order. A slow peer silent for two
// heartbeats stays slow. A down link: taken for gone when redialed and
// silent for dead_after, or never up after the grace; connected again when
// its backoff ends, or every `probe` while reads want it.
#include "tiering/peers/client/link_schedule.h"

#include <catch2/catch.hpp>
#include <chrono>

namespace tierfs {
namespace {

using namespace std::chrono_literals;

const UpLinkTimers kTimers{/*idle_close=*/60s, /*dead_after=*/10s, /*probe=*/100ms,
                           /*heartbeat=*/1s};

// A link made at t0, used, heard and pinged just now: nothing to do but
// look for a stall.
struct Fixture {
  LinkTime t0 = LinkTime(100h);
  LinkTime now = t0 + 30s;
  UpLinkClocks link;
  Fixture() {
    link.connected_at = t0;
    link.last_used = now;
    link.last_heard = now;
    link.last_ping = now;
    link.slow_until = t0;
    link.silence_bound = 1s;
  }
  UpStep Next() const { return NextUpStep(link, kTimers, now); }
  // The step once it was last heard from and pinged this long ago.
  UpStep Silent(std::chrono::milliseconds heard, std::chrono::milliseconds pinged) {
    link.last_heard = now - heard;
    link.last_ping = now - pinged;
    return Next();
  }
  void StalledAndWanted() {
    link.stalled = true;
    link.wanted = true;
  }
};

TEST_CASE("link schedule: the heartbeat is a quarter of dead_after within 10 ms and 1 s",
          "[peer]") {
  CHECK(Heartbeat(10s) == 1000ms);
  CHECK(Heartbeat(2s) == 500ms);
  CHECK(Heartbeat(20ms) == 10ms);
}

TEST_CASE("link schedule: a busy, heard link only looks for a stall", "[peer]") {
  Fixture f;
  CHECK(f.Next() == UpStep::kCheckStall);
}

TEST_CASE("link schedule: unused for idle_close with nothing in flight: closed", "[peer]") {
  Fixture f;
  f.link.last_used = f.now - 60s;
  CHECK(f.Next() == UpStep::kCheckStall);  // requests in flight: kept
  f.link.idle = true;
  CHECK(f.Next() == UpStep::kClose);
  // Closed before anything else, even when silent for dead_after.
  f.link.last_heard = f.now - 20s;
  CHECK(f.Next() == UpStep::kClose);
  f.link.last_used = f.now - 59s;
  CHECK(f.Next() == UpStep::kDown);
}

TEST_CASE("link schedule: silent for dead_after: down, before a redial", "[peer]") {
  Fixture f;
  f.StalledAndWanted();
  CHECK(f.Silent(10s, 0ms) == UpStep::kDown);
  CHECK(f.Silent(9s, 0ms) == UpStep::kRedial);
}

TEST_CASE("link schedule: stalled and wanted: made afresh after its silence bound", "[peer]") {
  Fixture f;
  f.StalledAndWanted();
  CHECK(f.Silent(999ms, 0ms) == UpStep::kCheckStall);
  CHECK(f.Silent(1s, 0ms) == UpStep::kRedial);
  // A connection made since: its silence counts from then.
  f.link.connected_at = f.now - 500ms;
  CHECK(f.Next() != UpStep::kRedial);
  f.link.connected_at = f.t0;
  // Not wanted, or not stalled: no redial.
  f.link.wanted = false;
  CHECK(f.Next() == UpStep::kCheckStall);
  f.link.wanted = true;
  f.link.stalled = false;
  CHECK(f.Next() == UpStep::kCheckStall);
}

TEST_CASE("link schedule: a heartbeat of silence both ways: a ping", "[peer]") {
  Fixture f;
  CHECK(f.Silent(1s, 0ms) == UpStep::kCheckStall);  // pinged just now
  CHECK(f.Silent(1s, 1s) == UpStep::kPing);
  CHECK(f.Silent(999ms, 1s) == UpStep::kCheckStall);
}

TEST_CASE("link schedule: stalled, skipped and wanted: probed every `probe`", "[peer]") {
  Fixture f;
  f.StalledAndWanted();
  f.link.slow_until = f.now + 2s;
  // Heard within its silence bound and the heartbeat.
  CHECK(f.Silent(500ms, 100ms) == UpStep::kProbe);
  CHECK(f.Silent(500ms, 99ms) == UpStep::kCheckStall);
  f.link.slow_until = f.now;  // no longer skipped: fetches wait for it, CheckStall probes
  CHECK(f.Silent(500ms, 100ms) == UpStep::kCheckStall);
}

TEST_CASE("link schedule: slow until lately and silent for two heartbeats: slow again", "[peer]") {
  Fixture f;
  f.link.slow_until = f.now - 500ms;
  f.link.last_heard = f.now - 2001ms;
  const auto until = SlowExtended(f.link, 1s, f.now);
  REQUIRE(until.has_value());
  CHECK(*until == f.now + 1s);
  f.link.last_heard = f.now - 2s;  // heard within two heartbeats
  CHECK_FALSE(SlowExtended(f.link, 1s, f.now).has_value());
  f.link.last_heard = f.now - 5s;
  f.link.slow_until = f.now - 1s;  // slow no longer since a heartbeat
  CHECK_FALSE(SlowExtended(f.link, 1s, f.now).has_value());
  f.link.slow_until = f.now + 1ms;  // still slow
  CHECK_FALSE(SlowExtended(f.link, 1s, f.now).has_value());
}

TEST_CASE("link schedule: a redialed peer is no death before dead_after of silence", "[peer]") {
  const LinkTime now = LinkTime(100h);
  CHECK(SilentButNotDead(true, now - 9s, 10s, now));
  CHECK_FALSE(SilentButNotDead(true, now - 10s, 10s, now));
  CHECK_FALSE(SilentButNotDead(false, now - 1s, 10s, now));  // not redialed: its failures count
}

// A down link, once up, cut off a while ago, its backoff still running.
struct DownFixture {
  LinkTime now = LinkTime(100h);
  DownLinkClocks link;
  DownFixture() {
    link.ever_up = true;
    link.last_heard = now - 5s;
    link.retry_at = now + 1s;
    link.last_attempt = now - 50ms;
  }
  DownStep Next(bool grace_over = true) const {
    return NextDownStep(link, /*dead_after=*/10s, /*probe=*/100ms, grace_over, now);
  }
};

TEST_CASE("link schedule: a down link waits for its backoff, or is probed while wanted", "[peer]") {
  DownFixture f;
  CHECK(f.Next().dial == DownStep::kWait);
  CHECK(f.Next().death == DownStep::kAlive);
  f.link.wanted = true;
  CHECK(f.Next().dial == DownStep::kWait);  // probed 50 ms ago
  f.link.last_attempt = f.now - 100ms;
  CHECK(f.Next().dial == DownStep::kProbe);
  f.link.left = true;  // it left the job: only its backoff brings it back
  CHECK(f.Next().dial == DownStep::kWait);
  f.link.left = false;
  f.link.ever_up = false;  // never up: no probe either
  CHECK(f.Next(false).dial == DownStep::kWait);
  f.link.retry_at = f.now;
  CHECK(f.Next(false).dial == DownStep::kRetry);
}

TEST_CASE("link schedule: a down link taken for gone: redialed and silent, or never up", "[peer]") {
  DownFixture f;
  f.link.redialing = true;
  CHECK(f.Next().death == DownStep::kAlive);  // silent 5 s of 10
  f.link.last_heard = f.now - 10s;
  CHECK(f.Next().death == DownStep::kSilent);
  f.link.dead = true;  // already gone: nothing more
  CHECK(f.Next().death == DownStep::kAlive);
  DownFixture never;
  never.link.ever_up = false;
  CHECK(never.Next(false).death == DownStep::kAlive);  // within the grace
  CHECK(never.Next(true).death == DownStep::kNeverUp);
  never.link.dead = true;  // taken for gone once, not at every tick
  CHECK(never.Next(true).death == DownStep::kAlive);
}

}  // namespace
}  // namespace tierfs
