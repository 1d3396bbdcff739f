// PeerAuth: MUNGE credentials for the handshake that opens every peer
// connection (peer_handshake.h). Mutual: the client's hello and the
// server's answer each carry a credential.
//
// munged stamps a credential with the uid and gid of the process that made
// it, and a MAC under the cluster's key: nobody can forge another user's or
// alter the payload. The payload (a PeerClaim) names the job, the sender,
// the receiver, a fresh nonce, the nonce it answers (the server's greeting,
// or the client's hello) and the sender's X25519 key for this connection. The
// receiver accepts only its own uid and gid (the mount's owner), its own
// job, and a claim addressed to itself. munged refuses a credential decoded
// a second time (replayed) or older than its TTL; its replay cache is per
// node, so the `to` field is what stops a credential made for one node from
// being played to another. Credentials are restricted to the expected uid
// (MUNGE_OPT_UID_RESTRICTION): another user on the node cannot decode one
// and so burn it before its addressee does.
//
// Binding the greeting's nonce is what makes a captured hello worthless:
// it was made for one listener's greeting only. The messages after the
// handshake are authenticated with keys derived from the two X25519 keys
// (peer_crypto.h, wire.h).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tiering/base/status.h"
#include "tiering/peers/transport/peer_crypto.h"

namespace tierfs {

using PeerNonce = std::array<uint8_t, 16>;

// Who this daemon is to its peers.
struct PeerIdentity {
  std::string job;   // the same on every node of the job, unique per job ("slurm:<cluster>:<id>")
  std::string name;  // this node's peer name, as the others list it
  uid_t uid = 0;     // accepted from peers: the mount owner's ids
  gid_t gid = 0;
};

// The payload of a hello or answer credential.
struct PeerClaim {
  enum Role : uint8_t { kHello = 1, kAnswer = 2 };
  Role role = kHello;
  PeerNonce nonce{};  // fresh per credential
  PeerNonce echo{};   // kHello: the server's greeting nonce; kAnswer: the hello's nonce
  PeerKey key{};      // the sender's X25519 public key for this connection
  std::string job, from, to;
};

inline constexpr size_t kMaxClaimField = 255;

// Binary, versioned; DecodeClaim refuses anything but an exact encoding.
std::string EncodeClaim(const PeerClaim& claim);
bool DecodeClaim(std::string_view data, PeerClaim* out);
PeerNonce RandomNonce();

enum class AuthVerdict {
  kOk,
  kInvalid,      // not a credential of this cluster's key, corrupted, or a bad payload
  kExpired,      // older than its TTL, or from the future
  kReplayed,     // munged has decoded it before
  kWrongUser,    // another uid or gid made it
  kWrongJob,     // another job
  kWrongPeer,    // addressed to another node, from an unexpected one, or a wrong echo
  kUnavailable,  // munged did not answer: nothing proven either way
};
const char* AuthVerdictName(AuthVerdict v);
// A counter name: "invalid", "expired", "replayed", "wrong_user", ...
const char* AuthVerdictKey(AuthVerdict v);

// What PeerAuth asks of MUNGE: a credential carrying a payload, and a
// credential decoded. The daemon's are munged's (MungeCredentials); the
// fuzz target of the server's half of the handshake gives a fake.
class Credentials {
 public:
  virtual ~Credentials() = default;
  // A credential of `payload` that only `uid` may decode, valid `ttl_s`.
  // Blocks on munged: not for a progress thread. Thread-safe.
  virtual Result<std::string> Encode(std::string_view payload, uid_t uid, int ttl_s) const = 0;
  struct Decoded {
    AuthVerdict verdict = AuthVerdict::kInvalid;  // kOk, or why not (detail)
    std::string detail;
    std::string payload;
    uid_t uid = 0;  // who made it
    gid_t gid = 0;
  };
  // Blocks on munged. Thread-safe.
  virtual Decoded Decode(std::string_view cred) const = 0;
};

// munged's, on its socket `munge_socket` ("" = libmunge's default).
std::unique_ptr<const Credentials> MungeCredentials(std::string munge_socket);

// A credential checked: kOk and its payload, or the verdict and why.
struct AuthCheck {
  AuthVerdict verdict = AuthVerdict::kInvalid;
  std::string detail;  // why, when not kOk
  PeerClaim claim;     // kOk: the payload
  bool ok() const { return verdict == AuthVerdict::kOk; }
};

class PeerAuth {
 public:
  // `munge_socket`: munged's socket ("" = libmunge's default); `ttl_s`: how
  // long a credential stays valid.
  PeerAuth(PeerIdentity self, std::string munge_socket, int ttl_s = 60);
  PeerAuth(PeerIdentity self, std::unique_ptr<const Credentials> credentials, int ttl_s = 60);

  const PeerIdentity& self() const { return self_; }

  // A credential carrying `claim`, or why munged made none. Blocks on
  // munged: not for a progress thread. Thread-safe.
  Result<std::string> Make(const PeerClaim& claim) const;

  // Decodes `cred` and checks it: uid, gid, job, role `role`, addressed to
  // this node. Blocks on munged. Thread-safe.
  AuthCheck Check(std::string_view cred, PeerClaim::Role role) const;

 private:
  const PeerIdentity self_;
  const std::unique_ptr<const Credentials> credentials_;
  const int ttl_s_;
};

}  // namespace tierfs
