// The wire messages between the peers of a job (issue 13). Each message is
// one UCX active message: a fixed little-endian header (the AM header, at
// most kMaxHeader bytes) and a body (the AM data): a credential, a path or a
// chunk's bytes. Decoding is strict: magic, version, type, every reserved
// field zero, the header's exact size for its type, every length bounded. A
// message that fails is garbage and its sender is cut off.
//
//   common (16 B)  magic u32 "TFSP" | version u8 | type u8 | reserved u16 | request_id u64
//   kHello         common                                    body: MUNGE credential
//   kHelloAnswer   common | error i32 | reserved u32         body: credential (error kOk) or empty
//   kRequest       common | file_size u64 | mtime_ns i64 |   body: path relative to SOURCE
//                  chunk_size u64 | chunk u32 | reserved u32 |
//                  range_off u64 | range_len u64 (0: the whole chunk)
//   kData          common | length u64                       body: exactly `length` bytes
//   kError         common | error i32 | reserved u32         body: empty
//
// A chunk is named by its path relative to SOURCE, not by a node id: ids
// agree between two nodes only if their snapshots are identical, and two
// files of equal size and mtime (fixed-size shards written in one second)
// would pass a size/mtime check under a shifted id. The path costs a lookup
// on the serving node; size, mtime and chunk size make a node whose snapshot
// or configuration differs answer kStale or kBadRequest, never other bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tierfs {

inline constexpr unsigned kPeerAmId = 7;            // the UCX active message id of every message
inline constexpr uint32_t kWireMagic = 0x50534654;  // "TFSP" in little-endian order
inline constexpr uint8_t kWireVersion = 1;
inline constexpr size_t kMaxHeader = 64;  // the largest header (kRequest)
inline constexpr size_t kMaxPeerPath = 4095;
inline constexpr size_t kMaxCredential = 4096;
inline constexpr uint64_t kMinWireChunk = 4096;
inline constexpr uint64_t kMaxWireChunk = uint64_t{1} << 30;

enum class MsgType : uint8_t { kHello = 1, kHelloAnswer = 2, kRequest = 3, kData = 4, kError = 5 };

// What a peer answers when it cannot send the bytes: wire numbers of our
// own, not the host's errno (mapped at the API by WireErrorToErrno).
enum class WireError : int32_t {
  kOk = 0,
  kNotFound = 1,    // no such file in the server's snapshot
  kStale = 2,       // the file's size or mtime differ: another snapshot
  kBadRequest = 3,  // chunk size differs, or chunk beyond the file
  kBusy = 4,        // the server's queue is full
  kIo = 5,          // the server could not read it (tier or SOURCE)
  kDenied = 6,      // not authenticated
  kShutdown = 7,    // the server is stopping
};
inline constexpr int32_t kMaxWireError = 7;

// -ENOENT, -ESTALE, -EINVAL, -EBUSY, -EIO, -EACCES, -ESHUTDOWN (0 for kOk).
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
  uint64_t chunk_size = 0;
  uint32_t chunk = 0;
  uint64_t range_off = 0;  // within the chunk
  uint64_t range_len = 0;  // 0: the whole chunk (range_off must then be 0)

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
  WireError error = WireError::kOk;  // kHelloAnswer, kError
  uint64_t length = 0;               // kData
  ChunkRef chunk;                    // kRequest (chunk.path is the body: set by the caller)
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

// Encoders: fill *h and return the header's size.
size_t EncodeHello(uint64_t request_id, WireHeader* h);
size_t EncodeHelloAnswer(uint64_t request_id, WireError error, WireHeader* h);
size_t EncodeRequest(uint64_t request_id, const ChunkRef& ref, WireHeader* h);
size_t EncodeData(uint64_t request_id, uint64_t length, WireHeader* h);
size_t EncodeError(uint64_t request_id, WireError error, WireHeader* h);

// Decodes a header and checks `body_size` against its type's bounds (a
// kRequest's path is checked by the caller, with ValidChunkRef, once it has
// the body). Any status but kOk is garbage.
WireStatus DecodeHeader(const void* header, size_t size, uint64_t body_size, PeerMessage* out);

}  // namespace tierfs
