// A peer transport that fails (as UCX's contained abort leaves it: the
// progress thread parked for good, the worker flagged wedged) and is
// started again, under concurrent fetches: the fetches waiting on it end
// at once (their callers read SOURCE), and the client asks, or the server
// answers, its peers again within seconds, with no remount. The restart
// bounds are transport_watch_test.cc's (test/unit/peer).
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "peer_client_failure_fixture.h"
#include "peer_fixture.h"

namespace tierfs {
namespace {

using namespace testing;

// Threads that fetch kRef from peer 0 of `client` until told to stop,
// counting what came back whole and what did not.
class Fetchers {
 public:
  Fetchers(PeerClient& client, int threads) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this, &client] {
        std::vector<char> buf(kChunk);
        while (!stop_.load()) {
          ssize_t r = client.Fetch(0, kRef, buf.data(), Clock::now() + 2s);
          if (r == static_cast<ssize_t>(kChunk)) {
            whole++;  // counted as it returns; its bytes checked after
            if (!IsPattern("f", kChunk, buf.data(), kChunk)) torn++;
          } else {
            failed++;
            std::this_thread::sleep_for(5ms);  // the caller reads SOURCE
          }
        }
      });
    }
  }
  ~Fetchers() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }
  std::atomic<int> whole{0}, failed{0}, torn{0};  // torn: returned whole, bytes wrong

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST_CASE(
    "peer transport: a client whose UCX failed ends its waiting fetches at once and asks "
    "again once started again",
    "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  TestNode a("a", &provider, kChunk);
  a.StartClient({b.address()});
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  Fetchers fetchers(a.client(), 4);
  REQUIRE(Within(5s, [&] { return fetchers.whole.load() >= 8; }));

  // The fetches in flight wait for b (its reads stall): when a's transport
  // fails they end within a fraction of their 2 s deadline.
  provider.Stall();
  std::this_thread::sleep_for(100ms);
  const int failed_before = fetchers.failed.load();
  const auto failed_at = Clock::now();
  a.client().WedgeForTest();
  REQUIRE(Within(2s, [&] { return a.client().transport_failed(); }));
  CHECK(Within(1s, [&] { return fetchers.failed.load() >= failed_before + 4; }));
  if (kTimed) CHECK(Since(failed_at) < 1s);
  provider.Release();
  // Not asked while failed: nothing comes back whole.
  std::this_thread::sleep_for(200ms);
  const int whole_failed = fetchers.whole.load();
  std::this_thread::sleep_for(300ms);
  CHECK(fetchers.whole.load() == whole_failed);

  const auto restart_at = Clock::now();
  Status s = a.client().RestartTransport();
  INFO(s.message());
  REQUIRE(s.ok());
  CHECK_FALSE(a.client().transport_failed());
  CHECK(a.client().transport_restarts() == 1);
  // Asked again within seconds, concurrently, bytes whole.
  CHECK(Within(5s, [&] { return fetchers.whole.load() >= whole_failed + 8; }));
  if (kTimed) CHECK(Since(restart_at) < 5s);
  CHECK(a.client().up(0));
  CHECK(a.client().counters(0).resumed >= 1);  // the connection made again by its ticket
  // A transport that has not failed is not started again.
  REQUIRE(a.client().RestartTransport().ok());
  CHECK(a.client().transport_restarts() == 1);
  CHECK(fetchers.torn.load() == 0);
}

TEST_CASE("peer transport: a server whose UCX failed serves its peers again once started again",
          "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  const uint16_t port = b.port();
  TestNode a("a", &provider, kChunk);
  PeerClientOptions options;
  options.dead_after = 800ms;  // b's silence is found within a second
  a.StartClient({b.address()}, options);
  REQUIRE(Within(5s, [&] { return a.client().up(0); }));
  Fetchers fetchers(a.client(), 4);
  REQUIRE(Within(5s, [&] { return fetchers.whole.load() >= 8; }));

  b.server().WedgeForTest();
  REQUIRE(Within(2s, [&] { return b.server().transport_failed(); }));
  std::this_thread::sleep_for(300ms);
  const uint64_t served = b.server().counters().served_chunks.load();
  Status s = b.server().RestartTransport();
  INFO(s.message());
  REQUIRE(s.ok());
  CHECK(b.server().transport_restarts() == 1);
  CHECK(b.port() == port);  // the same door, its socket kept
  const int whole = fetchers.whole.load();
  // a finds its old session silent, connects again through the door, and
  // is served by the new worker.
  CHECK(Within(8s, [&] { return fetchers.whole.load() >= whole + 8; }));
  CHECK(b.server().counters().served_chunks.load() > served);
  CHECK(a.client().counters(0).ups >= 2);
}

}  // namespace
}  // namespace tierfs
