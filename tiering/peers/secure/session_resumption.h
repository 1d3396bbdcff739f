// Session resumption: a reconnect between two daemons of a job without a
// MUNGE round trip. A full handshake (peer_handshake.h) leaves both sides a
// resumption secret RS besides the session's keys (the third block of the
// same HKDF, peer_crypto.h): the server files it as a ticket, the client
// keeps it for that server. A later connection may open with a Resume
// instead of a Hello:
//
//   server -> client  Greeting  a fresh nonce Ns, puzzle bits (as always)
//   client -> server  Resume    the puzzle's solution, the ticket's id T, a
//                               fresh nonce Nc, a fresh X25519 key Pc, the
//                               job, from, to, and a binder: HMAC-SHA256 under
//                               a key derived from RS of Ns and every byte
//                               of the frame before the binder
//   server -> client  Resumed   its fresh X25519 key Ps, the session id, and
//                               sealed (new server key, seq 1) its UCX
//                               worker's address; or a refusal (why), after
//                               which the client sends a Hello on the same
//                               connection: a full handshake.
//
// What holds, as for a full handshake:
// - Binding: T is derived from RS (one-way), so only the two daemons that
//   made the session know it before it is used; the server's entry names
//   the client it authenticated by MUNGE, and the frame names the job and
//   both nodes; all are checked.
// - Replay: the binder covers the server's fresh Ns, so a captured Resume
//   is worthless on any other connection, to this listener or another; a
//   ticket is single-use (spent when a Resume that verifies arrives, then
//   remembered as spent until it would have expired: a replay is counted
//   as one).
// - Forgery: without RS nobody makes a binder that verifies; a Resume
//   that does not verify leaves the ticket unspent (a forger cannot burn a
//   real peer's ticket).
// - Key confirmation: the binder proves the client holds RS for this very
//   greeting before the server keeps anything; the sealed address proves
//   to the client the server does; the session's first sealed message
//   (PeerDoor::Take) proves the new keys, as after a full handshake.
// - Forward secrecy: kept. The new keys come from a fresh X25519 exchange
//   and RS, salted with the new transcript (both nonces, both keys, T, the
//   job, both names): RS alone, later stolen, opens no past session.
// - Bounds: the server keeps at most `capacity` tickets (the oldest goes
//   first), each for `lifetime`; tickets live in memory only, so a
//   restarted daemon refuses every old ticket and its peers fall back to a
//   full handshake. Each session, full or resumed, leaves one new ticket.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/transport/peer_crypto.h"

namespace tierfs {

using TicketId = std::array<uint8_t, 16>;

inline constexpr std::chrono::seconds kTicketLifetime{24 * 3600};  // from when the session was made
inline constexpr size_t kMaxTickets = 8192;

// What the client keeps of a session, to resume it once.
struct ResumeTicket {
  TicketId id{};
  PeerKey secret{};  // RS
  std::chrono::steady_clock::time_point expires;
};
// The ticket of a session whose resumption secret is `secret`, usable until `expires`.
ResumeTicket TicketOf(const PeerKey& secret, std::chrono::steady_clock::time_point expires);

// Why a Resume was refused; the client then runs a full handshake.
enum class ResumeRefusal : uint8_t {
  kUnknown = 1,  // no such ticket here (never issued, evicted, or this daemon restarted)
  kExpired,      // older than its lifetime
  kReplayed,     // spent already
  kForged,       // the binder does not verify (or the key is invalid)
  kWrongJob,     // the Resume names another job
  kWrongPeer,    // addressed to another node, or the ticket is another node's
};
inline constexpr int kResumeRefusals = 7;       // array size, indexed by the enum
const char* ResumeRefusalKey(ResumeRefusal r);  // counter names: "unknown", "expired", ...

// The Resume frame, decoded.
struct ResumeRequest {
  uint64_t solution = 0;
  TicketId ticket{};
  PeerNonce nonce{};
  PeerKey key{};
  std::string job, from, to;
  std::array<uint8_t, 32> binder{};
};
// Frames (handshake_frames.cc; the framing of peer_handshake.h). Decoding is exact.
bool IsResumeFrame(std::string_view frame);  // by its magic alone
std::string EncodeResumeFrame(const ResumeRequest& r);
bool DecodeResumeFrame(std::string_view frame, ResumeRequest* out);
// `refusal` set: a refusal; else Ps, the session and the address sealed
// under `key` (empty on a libcrypto failure).
std::string EncodeResumedFrame(std::optional<ResumeRefusal> refusal, const PeerKey& server_key,
                               uint64_t session, const PeerKey& key,
                               std::string_view worker_address);
// Decodes a Resumed frame: *refusal set, or the server's key; the sealed
// part is opened by OpenResumedFrame once the keys are known.
bool DecodeResumedFrame(std::string_view frame, std::optional<ResumeRefusal>* refusal,
                        PeerKey* server_key);
bool OpenResumedFrame(std::string_view frame, const PeerKey& key, uint64_t* session,
                      std::string* worker_address);

// The client's half, around the socket work of RunClientHandshake.
struct ResumeAttempt {
  ResumeRequest request;
  PeerKeyPair mine;
  std::string frame;  // to send
};
// The Resume for `ticket` answering the greeting `greeting`. False only
// if libcrypto fails.
bool StartResume(const ResumeTicket& ticket, const PeerNonce& greeting, uint64_t solution,
                 const PeerIdentity& self, const std::string& server, ResumeAttempt* out);
// The session's keys and the ticket it leaves, from the server's key Ps.
// False if Ps is invalid.
bool ResumedKeys(const ResumeTicket& ticket, const PeerNonce& greeting,
                 const ResumeAttempt& attempt, const PeerKey& server_key, SessionKeys* out);

// The server's tickets. Not thread-safe: the door's thread only (the
// counters may be read anywhere).
class TicketStore {
 public:
  TicketStore(size_t capacity = kMaxTickets, std::chrono::seconds lifetime = kTicketLifetime);

  // Files the ticket of a confirmed session with `peer` (its
  // authenticated name); the oldest ticket goes if the store is full.
  void Issue(const PeerKey& secret, const std::string& peer);

  struct Resumed {
    std::optional<ResumeRefusal> refusal;  // set: refused, nothing else is
    std::string peer;                      // the ticket's client
    SessionKeys keys;                      // as the server's
    PeerKey server_key{};                  // Ps, for the Resumed frame
  };
  // Checks the Resume `frame` (decoded as `r`) on a connection whose
  // greeting sent `greeting`, as `self`; spends the ticket if it verifies.
  Resumed Resume(const PeerIdentity& self, const PeerNonce& greeting, std::string_view frame,
                 const ResumeRequest& r);

  size_t size() const { return size_.load(); }
  uint64_t evicted() const { return evicted_.load(); }

 private:
  struct Entry {
    PeerKey secret{};
    std::string peer;
    std::chrono::steady_clock::time_point expires;
    bool spent = false;  // kept until it expires, so that a replay is told apart
  };
  // Drops the expired, then the oldest until at most `keep` are left.
  void Drop(std::chrono::steady_clock::time_point now, size_t keep);

  const size_t capacity_;
  const std::chrono::seconds lifetime_;
  std::map<TicketId, Entry> tickets_;
  std::deque<std::pair<TicketId, std::chrono::steady_clock::time_point>> order_;  // by issue
  std::atomic<size_t> size_{0};
  std::atomic<uint64_t> evicted_{0};  // dropped unexpired to make room
};

}  // namespace tierfs
