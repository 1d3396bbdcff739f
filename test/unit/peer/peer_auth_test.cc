// PeerAuth against a real munged: a good hello passes; another user's,
// another job's, one addressed elsewhere, a corrupted and a replayed
// credential do not.
#include "tiering/peers/secure/peer_auth.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "munge_daemon.h"

namespace tierfs {
namespace {

using testing::MungeDaemon;

PeerIdentity Id(const std::string& name, const std::string& job = "job-7") {
  return PeerIdentity{job, name, ::geteuid(), ::getegid()};
}

// A hello from `from` to `to`, made by `auth`.
std::string Hello(const PeerAuth& auth, const std::string& to, PeerNonce nonce = RandomNonce()) {
  PeerClaim c{PeerClaim::kHello, nonce, {}, {}, auth.self().job, auth.self().name, to};
  Result<std::string> cred = auth.Make(c);
  INFO(cred.status().message());
  REQUIRE(cred.ok());
  return *cred;
}

TEST_CASE("peer auth: MUNGE credentials prove user, job and addressee", "[peer]") {
  if (!testing::MungedRunning()) return;
  MungeDaemon* munged = MungeDaemon::Get();
  PeerAuth a(Id("a"), munged->socket());
  PeerAuth b(Id("b"), munged->socket());

  SECTION("a hello to b passes b's check, once") {
    PeerNonce nonce = RandomNonce();
    std::string cred = Hello(a, "b", nonce);
    AuthCheck check = b.Check(cred, PeerClaim::kHello);
    REQUIRE(check.verdict == AuthVerdict::kOk);
    const PeerClaim& claim = check.claim;
    CHECK(claim.from == "a");
    CHECK(claim.job == "job-7");
    CHECK(claim.nonce == nonce);
    CHECK(b.Check(cred, PeerClaim::kHello).verdict == AuthVerdict::kReplayed);
  }
  SECTION("addressed to another node") {
    CHECK(b.Check(Hello(a, "c"), PeerClaim::kHello).verdict == AuthVerdict::kWrongPeer);
  }
  SECTION("another job") {
    PeerAuth other(Id("a", "job-8"), munged->socket());
    CHECK(b.Check(Hello(other, "b"), PeerClaim::kHello).verdict == AuthVerdict::kWrongJob);
  }
  SECTION("another role: a hello is not an answer") {
    CHECK(b.Check(Hello(a, "b"), PeerClaim::kAnswer).verdict == AuthVerdict::kInvalid);
  }
  SECTION("corrupted or not a credential") {
    std::string cred = Hello(a, "b");
    cred[cred.size() / 2] = cred[cred.size() / 2] == 'A' ? 'B' : 'A';
    CHECK(b.Check(cred, PeerClaim::kHello).verdict == AuthVerdict::kInvalid);
    CHECK(b.Check("MUNGE:garbage:", PeerClaim::kHello).verdict == AuthVerdict::kInvalid);
    CHECK(b.Check("", PeerClaim::kHello).verdict == AuthVerdict::kInvalid);
    CHECK(b.Check(std::string("MUNGE:\0x", 8), PeerClaim::kHello).verdict == AuthVerdict::kInvalid);
  }
  SECTION("made by another user") {
    if (::geteuid() != 0) {
      WARN("skipped: needs root to make a credential as another user");
      return;
    }
    PeerClaim forged{PeerClaim::kHello, RandomNonce(), {}, {}, "job-7", "a", "b"};
    std::string cred = testing::CredentialAs(65534, forged);
    AuthCheck check = b.Check(cred, PeerClaim::kHello);
    CHECK(check.verdict == AuthVerdict::kWrongUser);
    CHECK_THAT(check.detail, Catch::Contains("65534"));
  }
  SECTION("munged unreachable: nothing proven") {
    PeerAuth lost(Id("b"), "/nonexistent/munge.socket");
    Result<std::string> cred = lost.Make(PeerClaim{});
    CHECK_FALSE(cred.ok());
    CHECK_FALSE(cred.status().message().empty());
    CHECK(lost.Check(Hello(a, "b"), PeerClaim::kHello).verdict == AuthVerdict::kUnavailable);
  }
}

}  // namespace
}  // namespace tierfs
