// The wire messages between the peers of a job, once a connection is
// authenticated (peer_handshake.h). Each message is one UCX active
// message: a fixed little-endian header (the AM header, at most kMaxHeader
// bytes) and a body (the AM data): a path or a chunk's bytes. Every message
// is sealed (AES-256-GCM, peer_crypto.h) under its direction's key: the
// header up to the tag is authenticated, the body encrypted; the tag is the
// header's last 16 bytes. Decoding is strict: magic, version, type, every
// reserved field zero, the header's exact size for its type, every length
// bounded. A message that fails is garbage and its sender is cut off.
// Every message carries a GMAC tag (peer_crypto.h) under its direction's
// key over the header up to the tag and the body; the body travels in
// clear.
//
//   common (32 B)  magic u32 "TFSP" | version u8 | type u8 | flags u16 |
//                  request_id u64 | session u64 | seq u64
//   kRequest       common | file_size u64 | mtime_ns i64 | ctime_ns i64 |   body: path relative
//                  ino u64 | chunk_size u64 | chunk u32 | timeout_ms u32 |  to SOURCE
//                  range_off u64 | range_len u64 (0: the whole chunk) | tag
//   kData          common | length u64 | tag                                body: `length` bytes
//   kError         common | error i32 | reserved u32 | tag                  body: empty
//   kOffer         as kRequest, with path_len u32 for timeout_ms and the    body: path, then the
//                  range zero (whole chunks only)                           chunk's bytes
//   kPing, kPong,  common | tag                                             body: empty
//   kBye, kLeaving
//
// Sessions live as long as both ends think they do. The client's first
// message on a new session is a kPing (the server takes the session from
// its door at once); while the session is open the client pings when it
// has heard nothing for a heartbeat, and the server answers kPong (same
// request_id), so neither end forgets a session the other still holds
// during a long pause. A client that closes an idle session says kBye (no
// answer). A server that stops says kLeaving on every session it holds
// (sealed and numbered like any other message, so a forged or replayed one
// is ignored): its clients drop the link quietly and take the node for
// gone, rather than each logging a transport error. A node of an earlier
// version counts the message as stray. A message naming a session the server has forgotten but
// still has the keys of (it dropped it: idle, or cut off) is answered kError kUnknownSession under
// those keys: the client reconnects at once, for the cost of one round trip.
//
// `flags` is zero but in a kRequest, where kIfResident asks for the bytes
// only if the server holds the chunk or is promoting it; else it answers
// kNotResident at once, and the asker reads SOURCE itself and offers the
// copy to the server (kOffer: one-way, never answered), so a cold chunk
// costs its asker a round trip, not the home's SOURCE read and a transfer.
//
// `session` names the connection (the id the server gave it in the
// handshake), so the receiver knows which key opens the message; `seq` is
// the message's number in its direction (the GCM nonce; each is accepted
// once). `timeout_ms` is how long the asker still waits: the home does no
// work for it after that.
//
// A chunk is named by its path relative to SOURCE, not by a node id: ids
// agree between two nodes only if their snapshots are identical. The path
// costs a lookup on the serving node; size, mtime, ctime and inode number
// (the identity the local read path checks) and chunk size make a node whose
// snapshot or configuration differs answer kStale or kBadRequest, never
// other bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tiering/namespace/file_identity.h"
#include "tiering/peers/config/job_peers_config.h"  // kMinWireChunk, kMaxWireChunk
#include "tiering/peers/transport/peer_crypto.h"

namespace tierfs {

inline constexpr unsigned kPeerAmId = 7;  // the UCX active message id of every message
// The id of a server's watch on a client's endpoint (UcxWorker::Watch): no
// header, one byte that is never read.
inline constexpr unsigned kWatchAmId = 8;
inline constexpr uint32_t kWireMagic = 0x50534654;  // "TFSP" in little-endian order
inline constexpr uint8_t kWireVersion = 4;
inline constexpr size_t kMaxHeader = 112;  // the largest header (kRequest)
inline constexpr size_t kWireTag = 16;     // the GCM tag at the end of every header
inline constexpr size_t kMaxPeerPath = 4095;
inline constexpr size_t kMaxCredential = 4096;

enum class MsgType : uint8_t {
  kRequest = 3,
  kData = 4,
  kError = 5,
  kOffer = 6,
  kPing = 7,  // client -> server: are you there (and: take this session)
  kPong = 8,  // server -> client: the answer to kPing
  kBye = 9,   // client -> server: this session is closed by its client
  // server -> client: this node is leaving the job (its daemon stops): the
  // client drops the link without a warning, and takes it for gone.
  kLeaving = 10,
};

// kRequest flags.
inline constexpr uint16_t kIfResident = 1;  // the bytes only if the server has them (or soon)

// What a peer answers when it cannot send the bytes: wire numbers of our
// own, not the host's errno (mapped at the API by WireErrorToErrno).
enum class WireError : int32_t {
  kOk = 0,
  kNotFound = 1,        // no such file in the server's snapshot
  kStale = 2,           // the file's size or mtime differ: another snapshot
  kBadRequest = 3,      // chunk size differs, or chunk beyond the file
  kBusy = 4,            // the server's queue is full
  kIo = 5,              // the server could not read it (tier or SOURCE)
  kDenied = 6,          // not authenticated
  kShutdown = 7,        // the server is stopping
  kNotResident = 8,     // kIfResident: the server neither holds the chunk nor is promoting it
  kUnknownSession = 9,  // the server has forgotten this session: connect again
};
inline constexpr int32_t kMaxWireError = 9;

// -ENOENT, -ESTALE, -EINVAL, -EBUSY, -EIO, -EACCES, -ESHUTDOWN, -ENODATA,
// -ECONNRESET (0 for kOk).
int WireErrorToErrno(WireError e);
// The reverse, for a provider's -errno: anything unlisted is kIo.
WireError WireErrorFromErrno(int neg_errno);

// One chunk of one SOURCE file, as the asking node's snapshot describes it,
// or a byte range of it: a node that keeps no copy (its tiers are full)
// asks only for what its reader wants.
struct ChunkRef {
  std::string_view path;  // relative to SOURCE, no "." or ".." components
  uint64_t file_size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t ino = 0;  // SOURCE's inode number
  uint64_t chunk_size = 0;
  uint32_t chunk = 0;
  uint64_t range_off = 0;  // within the chunk
  uint64_t range_len = 0;  // 0: the whole chunk (range_off must then be 0)

  // The version of the file the asker's snapshot holds.
  FileIdentity file() const { return {file_size, mtime_ns, ctime_ns, ino}; }
  // Where the chunk starts in the file.
  uint64_t offset() const { return uint64_t{chunk} * chunk_size; }
  // Bytes in the chunk (the last one of a file may be short).
  uint64_t chunk_length() const;
  // Where the bytes asked for start in the file, and how many they are.
  uint64_t file_offset() const { return offset() + range_off; }
  uint64_t length() const { return range_len != 0 ? range_len : chunk_length(); }
};

// A relative path without empty, "." or ".." components or NUL, at most
// kMaxPeerPath bytes, each component at most 255.
bool ValidPeerPath(std::string_view path);
// The path is valid, the chunk size within [kMinWireChunk, kMaxWireChunk],
// the chunk inside the file (chunk 0 of an empty file is allowed) and the
// range inside the chunk.
bool ValidChunkRef(const ChunkRef& ref);

// A decoded header; which fields mean something depends on `type`.
struct PeerMessage {
  MsgType type = MsgType::kError;
  uint64_t request_id = 0;
  uint64_t session = 0;
  uint64_t seq = 0;
  WireError error = WireError::kOk;  // kError
  uint64_t length = 0;               // kData
  ChunkRef chunk;           // kRequest, kOffer (chunk.path is in the body: set by the caller)
  uint32_t timeout_ms = 0;  // kRequest
  uint16_t flags = 0;       // kRequest
  uint32_t path_len = 0;    // kOffer: the body's first path_len bytes are the path
};

enum class WireStatus {
  kOk,
  kBadMagic,
  kBadVersion,  // counted apart: a peer running another tierfs
  kBadType,
  kBadHeader,  // wrong size for its type, reserved bits set, unknown error code
  kBadBody,    // body length out of bounds for its type
};
const char* WireStatusName(WireStatus s);

using WireHeader = std::array<uint8_t, kMaxHeader>;

// Encoders: fill *h (the tag zero, for SealWire) and return the header's size.
struct WireIds {
  uint64_t request_id = 0;
  uint64_t session = 0;
  uint64_t seq = 0;
};
size_t EncodeRequest(const WireIds& ids, const ChunkRef& ref, uint32_t timeout_ms, WireHeader* h,
                     uint16_t flags = 0);
// A whole chunk offered (ref's range is ignored); its path is ref.path.
size_t EncodeOffer(const WireIds& ids, const ChunkRef& ref, WireHeader* h);
size_t EncodeData(const WireIds& ids, uint64_t length, WireHeader* h);
size_t EncodeError(const WireIds& ids, WireError error, WireHeader* h);
// kPing, kPong, kBye or kLeaving: the common part and the tag.
size_t EncodeBare(MsgType type, const WireIds& ids, WireHeader* h);

// Decodes a header and checks `body_size` against its type's bounds (a
// kRequest's path is checked by the caller, with ValidChunkRef, once it has
// the body). Any status but kOk is garbage. The tag is not checked here.
WireStatus DecodeHeader(const void* header, size_t size, uint64_t body_size, PeerMessage* out);

// Seals an encoded message under `key` at the header's seq: writes the
// tag of the header and the `size` bytes of `body` into the header, and
// copies the body to `out` unless it is null or `body` itself.
bool SealWire(const PeerKey& key, WireHeader* h, size_t header_size, const void* body, size_t size,
              void* out);
// Opens one: false if the tag does not authenticate the header and body;
// else the body is copied to `out` (unless null or `body` itself).
bool OpenWire(const PeerKey& key, const void* header, size_t header_size, uint64_t seq,
              const void* body, size_t size, void* out);

}  // namespace tierfs
