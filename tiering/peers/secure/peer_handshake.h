// The handshake that opens every peer connection, on a plain TCP socket the
// daemon accepts itself (PeerDoor), before any UCX resource is spent on it:
//
//   server -> client  Greeting    a fresh nonce Ns, puzzle bits (door_puzzle.h)
//   client -> server  Hello       the puzzle's solution, and
//                                 MUNGE credential of {hello, nonce Nc, echo Ns,
//                                 X25519 key Pc, job, from client, to server}
//   server -> client  Answer      MUNGE credential of {answer, nonce, echo Nc,
//                                 X25519 key Ps, job, from server, to client},
//                                 or a refusal code
//   client -> server  Bind        sealed (client key, seq 1): a fixed text (key confirmation)
//   server -> client  BindAnswer  sealed (server key, seq 1): session id, server's
//                                 UCX worker address
//
// The server speaks first, so a credential is only ever made for a nonce
// the listener chose: one captured by whoever listened (a user who bound the
// port first) names that listener's nonce and is refused by any other. The
// keys come from the X25519 secret and the transcript (both nonces, both
// keys, the job, both names): peer_crypto.h. Every message after this one
// (UCX active messages, wire.h) carries the session id, a sequence number
// and a GCM tag under those keys.
//
// A reconnect may resume an earlier session instead (a Resume in place of
// the Hello, no MUNGE): session_resumption.h.
//
// Both halves are here: RunClientHandshake, the client's whole side, and
// AnswerHello, the server's work on a hello (the door, PeerDoor, does the
// socket work around it: greeting, puzzle, bind). Frames
// (handshake_frames.cc): a u32 little-endian length (1..kMaxFrame), then
// that many bytes, starting with a u32 magic and a u8 version. Decoding is
// exact.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "tiering/base/status.h"
#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/secure/session_resumption.h"
#include "tiering/peers/secure/source_ports.h"
#include "tiering/peers/transport/peer_crypto.h"

namespace tierfs {

inline constexpr size_t kMaxFrame = 8192;
inline constexpr size_t kMaxWorkerAddress = 4096;

// The transcript both sides derive their keys from.
std::string HandshakeTranscript(const PeerNonce& server_nonce, const PeerNonce& client_nonce,
                                const PeerKey& client_key, const PeerKey& server_key,
                                std::string_view job, std::string_view client,
                                std::string_view server);

// Frame payloads (without the length prefix).
// A greeting asks for a puzzle of `bits` (0..kMaxPuzzleBits) solved.
std::string EncodeGreeting(const PeerNonce& nonce, unsigned bits = 0);
bool DecodeGreeting(std::string_view frame, PeerNonce* nonce, unsigned* bits = nullptr);
std::string EncodeHelloFrame(std::string_view cred, uint64_t solution = 0);
bool DecodeHelloFrame(std::string_view frame, std::string_view* cred, uint64_t* solution = nullptr);
// `refusal` 0: the answer carries `cred`; else a WireError number and no credential.
std::string EncodeAnswerFrame(int32_t refusal, std::string_view cred);
bool DecodeAnswerFrame(std::string_view frame, int32_t* refusal, std::string_view* cred);
// Sealed with `key` at sequence 1. Empty on a libcrypto failure. The bind
// proves the client holds the keys before the server keeps a session.
std::string EncodeBindFrame(const PeerKey& key);
bool DecodeBindFrame(std::string_view frame, const PeerKey& key);
std::string EncodeBindAnswerFrame(const PeerKey& key, uint64_t session,
                                  std::string_view worker_address);
bool DecodeBindAnswerFrame(std::string_view frame, const PeerKey& key, uint64_t* session,
                           std::string* worker_address);

// A frame with its length prefix.
std::string Framed(std::string_view payload);

// Accumulates a frame from a non-blocking socket.
class FrameReader {
 public:
  enum Result { kMore, kDone, kClosed, kBad };
  // Reads what `fd` has. kDone: frame() holds a whole frame; kClosed: EOF
  // or an error; kBad: a length out of bounds.
  Result Feed(int fd);
  std::string_view frame() const;
  void Reset() { buf_.clear(); }

 private:
  std::string buf_;
};

// What the client learns from a handshake that succeeded.
struct ClientSession {
  SessionKeys keys;
  uint64_t session = 0;
  std::string worker_address;            // the server's UCX worker
  bool resumed = false;                  // by a ticket: no MUNGE credential made or checked
  std::optional<ResumeRefusal> refused;  // the ticket offered was refused: why
  ResumeTicket ticket;                   // what resumes this session later, once
};

enum class HandshakeResult {
  kOk,
  kUnreachable,  // no connection, or it closed, or a deadline passed
  kRefused,      // the server refused our hello
  kBadPeer,      // the server's answer failed authentication: not our peer
  kGarbage,      // a frame that does not decode
  kLocal,        // munged or libcrypto failed here
};

// The errno of a failed client handshake's Status says which failure it was
// (HandshakeFailure); any other errno is kUnreachable.
inline constexpr int kHandshakeUnreachable = ETIMEDOUT;
inline constexpr int kHandshakeRefused = EACCES;
inline constexpr int kHandshakeBadPeer = EKEYREJECTED;
inline constexpr int kHandshakeGarbage = EPROTO;
inline constexpr int kHandshakeLocal = EAGAIN;
HandshakeResult HandshakeFailure(const Status& s);  // kOk for an ok Status

// The client's half: runs the handshake on a connected socket `fd` (it is
// made non-blocking; every step waits at most until `deadline`). `server` is
// the name the peer list gives the server. With `ticket` (one this server
// left an earlier session), the session is resumed if the server still
// holds it, else the full handshake follows on the same connection. The
// session, or why not.
Result<ClientSession> RunClientHandshake(int fd, const PeerAuth& auth, const std::string& server,
                                         std::chrono::steady_clock::time_point deadline,
                                         const ResumeTicket* ticket = nullptr);

// What the server's half made of a hello.
struct HelloAnswer {
  AuthVerdict verdict = AuthVerdict::kInvalid;  // kOk, or why the hello is refused
  std::string detail;                           // why, when not kOk
  std::string answer;                           // kOk: the Answer frame's credential
  std::string peer;                             // the client's name, once its hello checked
  SessionKeys keys;                             // kOk: the session's keys, as the server's
};

// The server's half, between the greeting and the bind: checks the hello
// credential `hello` (a hello addressed to this node, of its job and user,
// echoing `greeting`, the nonce this connection's greeting sent), derives
// the session keys and makes the answer's credential. Blocks on munged: it
// runs on the door's pool. The door sends the answer, then awaits the bind.
HelloAnswer AnswerHello(const PeerAuth& auth, const PeerNonce& greeting, std::string_view hello);

// Connects to host:port (IPv4) by `deadline`: a socket, or why not. From
// a port of `from` (source_ports.h) when this process may bind one and one
// of the few tried is free (and its pair with the door is not in
// TIME_WAIT); from any port otherwise.
Result<int> ConnectTcp(const std::string& host, uint16_t port,
                       std::chrono::steady_clock::time_point deadline,
                       SourcePort from = SourcePort::kAny);

}  // namespace tierfs
