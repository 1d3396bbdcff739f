// Session resumption without a door: a ticket filed by one server resumes
// once, for its job, its two nodes and the greeting it answers, within its
// lifetime; forged, replayed, misaddressed, expired and unknown tickets
// are refused, each for its reason; the store is bounded.
#include "tiering/peers/secure/session_resumption.h"

#include <catch2/catch.hpp>
#include <thread>

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

PeerKey Secret(uint8_t seed) {
  PeerKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(seed * 31 + i);
  return k;
}

PeerIdentity Node(const std::string& name, const std::string& job = "job-1") {
  return PeerIdentity{job, name, 0, 0};
}

// A client's resume of `ticket` to `server`, answering `greeting`.
struct Attempt {
  ResumeAttempt a;
  ResumeRequest decoded;
  Attempt(const ResumeTicket& ticket, const PeerNonce& greeting, const PeerIdentity& client,
          const std::string& server) {
    REQUIRE(StartResume(ticket, greeting, 7, client, server, &a));
    REQUIRE(DecodeResumeFrame(a.frame, &decoded));
  }
};

ResumeTicket Filed(TicketStore& store, const PeerKey& secret, const std::string& peer) {
  store.Issue(secret, peer);
  return TicketOf(secret, Clock::now() + 1h);
}

TEST_CASE("session resumption: a ticket resumes once, with keys both sides agree on", "[peer]") {
  TicketStore store;
  const ResumeTicket ticket = Filed(store, Secret(1), "a");
  CHECK(store.size() == 1);
  const PeerNonce greeting = RandomNonce();
  Attempt c(ticket, greeting, Node("a"), "b");
  CHECK(IsResumeFrame(c.a.frame));
  CHECK(EncodeResumeFrame(c.decoded) == c.a.frame);  // decoding is exact
  TicketStore::Resumed s = store.Resume(Node("b"), greeting, c.a.frame, c.decoded);
  REQUIRE_FALSE(s.refusal);
  CHECK(s.peer == "a");
  SessionKeys mine;
  REQUIRE(ResumedKeys(ticket, greeting, c.a, s.server_key, &mine));
  CHECK(mine.send == s.keys.recv);
  CHECK(mine.recv == s.keys.send);
  CHECK(mine.resume == s.keys.resume);  // the next ticket, the same at both ends
  CHECK(mine.resume != ticket.secret);
  CHECK(mine.send != mine.recv);
  // The answer opens under the new keys only.
  std::string answer = EncodeResumedFrame(std::nullopt, s.server_key, 42, s.keys.send, "worker");
  std::optional<ResumeRefusal> refusal;
  PeerKey server_key{};
  REQUIRE(DecodeResumedFrame(answer, &refusal, &server_key));
  CHECK_FALSE(refusal);
  CHECK(server_key == s.server_key);
  uint64_t session = 0;
  std::string worker;
  CHECK_FALSE(OpenResumedFrame(answer, ticket.secret, &session, &worker));
  REQUIRE(OpenResumedFrame(answer, mine.recv, &session, &worker));
  CHECK(session == 42);
  CHECK(worker == "worker");
  // Spent: the same frame again is a replay.
  CHECK(store.Resume(Node("b"), greeting, c.a.frame, c.decoded).refusal ==
        ResumeRefusal::kReplayed);
}

TEST_CASE("session resumption: a resume made for one greeting is refused on any other", "[peer]") {
  TicketStore store;
  const ResumeTicket ticket = Filed(store, Secret(2), "a");
  Attempt c(ticket, RandomNonce(), Node("a"), "b");
  // Captured and played on another connection (this listener or another):
  // its binder covers the greeting it answered.
  CHECK(store.Resume(Node("b"), RandomNonce(), c.a.frame, c.decoded).refusal ==
        ResumeRefusal::kForged);
  // Not spent by the forgery: the real client still resumes.
  const PeerNonce greeting = RandomNonce();
  Attempt again(ticket, greeting, Node("a"), "b");
  CHECK_FALSE(store.Resume(Node("b"), greeting, again.a.frame, again.decoded).refusal);
}

TEST_CASE("session resumption: without the secret no resume verifies", "[peer]") {
  TicketStore store;
  ResumeTicket ticket = Filed(store, Secret(3), "a");
  const PeerNonce greeting = RandomNonce();
  ResumeTicket stolen_id = ticket;  // the id (seen on the wire once used) without the secret
  stolen_id.secret = Secret(4);
  Attempt forged(stolen_id, greeting, Node("a"), "b");
  CHECK(store.Resume(Node("b"), greeting, forged.a.frame, forged.decoded).refusal ==
        ResumeRefusal::kForged);
  // One bit of the binder, or of anything it covers, flipped.
  Attempt c(ticket, greeting, Node("a"), "b");
  for (size_t at : {size_t{10}, size_t{40}, c.a.frame.size() - 1}) {
    std::string altered = c.a.frame;
    altered[at] ^= 0x04;
    ResumeRequest r;
    REQUIRE(DecodeResumeFrame(altered, &r));
    CHECK(store.Resume(Node("b"), greeting, altered, r).refusal == ResumeRefusal::kForged);
  }
  CHECK_FALSE(store.Resume(Node("b"), greeting, c.a.frame, c.decoded).refusal);
}

TEST_CASE("session resumption: a ticket of another job or another node pair is refused", "[peer]") {
  TicketStore store;
  const ResumeTicket ticket = Filed(store, Secret(5), "a");
  const PeerNonce greeting = RandomNonce();
  // The server is of another job.
  Attempt c(ticket, greeting, Node("a"), "b");
  CHECK(store.Resume(Node("b", "job-2"), greeting, c.a.frame, c.decoded).refusal ==
        ResumeRefusal::kWrongJob);
  // Addressed to another node.
  CHECK(store.Resume(Node("c"), greeting, c.a.frame, c.decoded).refusal ==
        ResumeRefusal::kWrongPeer);
  // Offered by another node than the one it was filed for (with its secret).
  Attempt other(ticket, greeting, Node("d"), "b");
  CHECK(store.Resume(Node("b"), greeting, other.a.frame, other.decoded).refusal ==
        ResumeRefusal::kWrongPeer);
  // Another server never filed it.
  TicketStore elsewhere;
  CHECK(elsewhere.Resume(Node("b"), greeting, c.a.frame, c.decoded).refusal ==
        ResumeRefusal::kUnknown);
  // None of these spent it.
  CHECK_FALSE(store.Resume(Node("b"), greeting, c.a.frame, c.decoded).refusal);
}

TEST_CASE("session resumption: a ticket expires, and a restarted server holds none", "[peer]") {
  TicketStore store(16, std::chrono::seconds(1));
  const ResumeTicket ticket = Filed(store, Secret(6), "a");
  const PeerNonce greeting = RandomNonce();
  Attempt c(ticket, greeting, Node("a"), "b");
  std::this_thread::sleep_for(1100ms);  // outlives the lifetime
  CHECK(store.Resume(Node("b"), greeting, c.a.frame, c.decoded).refusal == ResumeRefusal::kExpired);
  store.Issue(Secret(7), "a");  // expired ones go as new ones come
  CHECK(store.size() == 1);
  // A restart: the tickets lived in memory only.
  TicketStore restarted;
  const ResumeTicket live = Filed(store, Secret(8), "a");
  Attempt d(live, greeting, Node("a"), "b");
  CHECK(restarted.Resume(Node("b"), greeting, d.a.frame, d.decoded).refusal ==
        ResumeRefusal::kUnknown);
}

TEST_CASE("session resumption: the store keeps at most its capacity, the newest", "[peer]") {
  TicketStore store(2);
  const PeerNonce greeting = RandomNonce();
  std::vector<ResumeTicket> tickets;
  for (uint8_t i = 0; i < 3; ++i) tickets.push_back(Filed(store, Secret(10 + i), "a"));
  CHECK(store.size() == 2);
  CHECK(store.evicted() == 1);
  Attempt oldest(tickets[0], greeting, Node("a"), "b");
  CHECK(store.Resume(Node("b"), greeting, oldest.a.frame, oldest.decoded).refusal ==
        ResumeRefusal::kUnknown);
  Attempt newest(tickets[2], greeting, Node("a"), "b");
  CHECK_FALSE(store.Resume(Node("b"), greeting, newest.a.frame, newest.decoded).refusal);
}

TEST_CASE("session resumption: frames decode exactly, refusals name a known reason", "[peer]") {
  ResumeRequest r;
  r.job = "job";
  r.from = "a";
  r.to = "b";
  const std::string f = EncodeResumeFrame(r);
  ResumeRequest back;
  REQUIRE(DecodeResumeFrame(f, &back));
  CHECK_FALSE(DecodeResumeFrame(f + "x", &back));
  CHECK_FALSE(DecodeResumeFrame(f.substr(0, f.size() - 1), &back));
  r.job.assign(kMaxClaimField + 1, 'j');
  CHECK(EncodeResumeFrame(r).empty());
  std::optional<ResumeRefusal> refusal;
  PeerKey key{};
  REQUIRE(DecodeResumedFrame(EncodeResumedFrame(ResumeRefusal::kExpired, {}, 0, {}, {}), &refusal,
                             &key));
  CHECK(refusal == ResumeRefusal::kExpired);
  std::string unknown_reason = EncodeResumedFrame(ResumeRefusal::kExpired, {}, 0, {}, {});
  unknown_reason[8] = 9;
  CHECK_FALSE(DecodeResumedFrame(unknown_reason, &refusal, &key));
  CHECK(std::string(ResumeRefusalKey(ResumeRefusal::kWrongPeer)) == "wrong_peer");
}

}  // namespace
}  // namespace tierfs
