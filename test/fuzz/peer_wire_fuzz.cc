// Fuzz target: what another node (or anyone who can reach the peer port)
// sends, and the peer list a mount is given (issue 13):
//   first byte % 3 == 0: a message: the next byte is the header's size, then
//       the header, then the body (DecodeHeader; for a request, the path and
//       ValidChunkRef, as PeerServer does);
//   == 1: a handshake claim (DecodeClaim, the payload of a MUNGE credential);
//   == 2: a peer list file (ParsePeerFile).
// It aborts on any breach of:
//   - a decoded header re-encodes to the very bytes it came from;
//   - a valid chunk reference names bytes inside the file and the chunk;
//   - a decoded claim re-encodes to its input (the encoding is exact);
//   - an accepted peer list has valid, unique names and non-zero ports.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

#include "tiering/peers/config/peer_list.h"
#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {
namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "peer_wire_fuzz: %s\n", what);
  std::abort();
}

void Message(std::string_view in) {
  if (in.empty()) return;
  size_t header_size = std::min<size_t>(static_cast<uint8_t>(in[0]), in.size() - 1);
  std::string_view header = in.substr(1, header_size);
  std::string_view body = in.substr(1 + header_size);
  PeerMessage m;
  if (DecodeHeader(header.data(), header.size(), body.size(), &m) != WireStatus::kOk) return;
  WireHeader again{};
  size_t n = 0;
  const WireIds ids{m.request_id, m.session, m.seq};
  switch (m.type) {
    case MsgType::kRequest:
      n = EncodeRequest(ids, m.chunk, m.timeout_ms, &again, m.flags);
      break;
    case MsgType::kOffer: {
      // Its path is the body's first path_len bytes; the bytes follow.
      if (m.path_len == 0 || m.path_len > body.size()) Fail("an offer's path outside its body");
      ChunkRef ref = m.chunk;
      ref.path = body.substr(0, m.path_len);
      if (body.size() - m.path_len != ref.chunk_length() || ref.chunk_length() > ref.chunk_size)
        Fail("an offer's bytes are not its whole chunk");
      n = EncodeOffer(ids, ref, &again);
      break;
    }
    case MsgType::kData:
      n = EncodeData(ids, m.length, &again);
      break;
    case MsgType::kError:
      n = EncodeError(ids, m.error, &again);
      break;
    case MsgType::kPing:
    case MsgType::kPong:
    case MsgType::kBye:
    case MsgType::kLeaving:
      n = EncodeBare(m.type, ids, &again);
      break;
  }
  // The tag is not decoded: compare everything before it.
  if (n != header.size() || n < kWireTag ||
      std::memcmp(again.data(), header.data(), n - kWireTag) != 0) {
    Fail("a decoded header does not re-encode to its bytes");
  }
  if (m.type != MsgType::kRequest) return;
  ChunkRef ref = m.chunk;
  ref.path = body;
  if (!ValidChunkRef(ref)) return;
  if (ref.file_size == 0) {
    if (ref.length() != 0) Fail("bytes asked of an empty file");
    return;
  }
  if (ref.length() == 0 || ref.length() > ref.chunk_size) Fail("a range outside its chunk");
  if (ref.file_offset() < ref.offset() || ref.file_offset() >= ref.file_size ||
      ref.length() > ref.file_size - ref.file_offset()) {
    Fail("a valid reference names bytes outside the file");
  }
  if (ref.range_off + ref.length() > ref.chunk_length()) Fail("a range past the chunk's end");
}

void Claim(std::string_view in) {
  PeerClaim c;
  if (!DecodeClaim(in, &c)) return;
  if (EncodeClaim(c) != in) Fail("a decoded claim does not re-encode to its input");
}

void List(std::string_view in) {
  auto list = ParsePeerFile(in, 7740);
  if (!list.ok()) {
    if (list.status().message().empty()) Fail("a refused list without a message");
    return;
  }
  const std::vector<PeerEntry>& peers = *list;
  std::set<std::string> names;
  for (const PeerEntry& p : peers) {
    if (!ValidPeerName(p.name) || !ValidPeerName(p.host) || p.port == 0) Fail("a bad entry kept");
    if (!names.insert(p.name).second) Fail("a name listed twice was kept");
  }
  if (peers.empty() || peers.size() > kMaxPeers) Fail("an empty or oversized list kept");
}

}  // namespace
}  // namespace tierfs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      tierfs::Message(in);
      break;
    case 1:
      tierfs::Claim(in);
      break;
    default:
      tierfs::List(in);
      break;
  }
  return 0;
}
