// The peer wire messages and the MUNGE claim payload: round trips, strict
// decoding of everything else, and the seal every message carries.
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <string>

#include "tiering/peers/secure/peer_auth.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {
namespace {

constexpr uint64_t kMiB = 1 << 20;

ChunkRef Ref(std::string_view path, uint64_t size, uint32_t chunk) {
  return ChunkRef{path, size, 1234567890123, 1234567890999, 4242, 8 * kMiB, chunk};
}

WireIds Ids(uint64_t request_id) { return WireIds{request_id, 0x5E55, 9}; }

TEST_CASE("peer wire: every message decodes to what was encoded", "[peer]") {
  WireHeader h;
  PeerMessage m;
  size_t n = EncodeRequest(Ids(77), Ref("a/b.jpg", 20 * kMiB, 2), 4500, &h);
  REQUIRE(DecodeHeader(h.data(), n, 7, &m) == WireStatus::kOk);
  CHECK(m.type == MsgType::kRequest);
  CHECK(m.request_id == 77);
  CHECK(m.session == 0x5E55);
  CHECK(m.seq == 9);
  CHECK(m.timeout_ms == 4500);
  CHECK(m.chunk.file_size == 20 * kMiB);
  CHECK(m.chunk.mtime_ns == 1234567890123);
  CHECK(m.chunk.ctime_ns == 1234567890999);
  CHECK(m.chunk.ino == 4242);
  CHECK(m.chunk.chunk_size == 8 * kMiB);
  CHECK(m.chunk.chunk == 2);

  n = EncodeData(Ids(5), 4 * kMiB, &h);
  REQUIRE(DecodeHeader(h.data(), n, 4 * kMiB, &m) == WireStatus::kOk);
  CHECK((m.type == MsgType::kData && m.length == 4 * kMiB && m.request_id == 5));

  n = EncodeError(Ids(6), WireError::kStale, &h);
  REQUIRE(DecodeHeader(h.data(), n, 0, &m) == WireStatus::kOk);
  CHECK((m.type == MsgType::kError && m.error == WireError::kStale));
  CHECK(WireErrorToErrno(m.error) == -ESTALE);

  n = EncodeError(Ids(7), WireError::kNotResident, &h);
  REQUIRE(DecodeHeader(h.data(), n, 0, &m) == WireStatus::kOk);
  CHECK(WireErrorToErrno(m.error) == -ENODATA);
  CHECK(WireErrorFromErrno(-ENODATA) == WireError::kNotResident);

  n = EncodeRequest(Ids(8), Ref("a/b.jpg", 20 * kMiB, 2), 4500, &h, kIfResident);
  REQUIRE(DecodeHeader(h.data(), n, 7, &m) == WireStatus::kOk);
  CHECK(m.flags == kIfResident);

  const ChunkRef offered = Ref("a/b.jpg", 20 * kMiB, 2);
  n = EncodeOffer(Ids(0), offered, &h);
  REQUIRE(DecodeHeader(h.data(), n, 7 + 4 * kMiB, &m) == WireStatus::kOk);
  CHECK(m.type == MsgType::kOffer);
  CHECK(m.path_len == 7);
  CHECK(m.flags == 0);
  CHECK((m.chunk.file_size == 20 * kMiB && m.chunk.chunk == 2 && m.chunk.ino == 4242));
  CHECK((m.chunk.range_off == 0 && m.chunk.range_len == 0));
}

TEST_CASE("peer wire: a sealed message opens only as it was sealed", "[peer]") {
  PeerKey key{}, other{};
  key[0] = 1;
  other[0] = 2;
  WireHeader h;
  const std::string body = "train/n01440764/img_1.JPEG";
  size_t n = EncodeRequest(Ids(3), Ref("x", 10, 0), 100, &h);
  std::string sealed(body.size(), '\0');
  REQUIRE(SealWire(key, &h, n, body.data(), body.size(), sealed.data()));
  CHECK(sealed == body);  // authenticated, not encrypted
  std::string opened(body.size(), '\0');
  REQUIRE(OpenWire(key, h.data(), n, 9, sealed.data(), sealed.size(), opened.data()));
  CHECK(opened == body);
  CHECK_FALSE(OpenWire(other, h.data(), n, 9, sealed.data(), sealed.size(), opened.data()));
  CHECK_FALSE(OpenWire(key, h.data(), n, 10, sealed.data(), sealed.size(), opened.data()));
  for (size_t i : {size_t{0}, size_t{20}, size_t{40}, n - 1}) {  // header, tag
    WireHeader bad = h;
    bad[i] ^= 0x10;
    INFO(i);
    CHECK_FALSE(OpenWire(key, bad.data(), n, 9, sealed.data(), sealed.size(), opened.data()));
  }
  std::string flipped = sealed;
  flipped[3] ^= 1;
  CHECK_FALSE(OpenWire(key, h.data(), n, 9, flipped.data(), flipped.size(), opened.data()));
  CHECK_FALSE(OpenWire(key, h.data(), n, 9, sealed.data(), sealed.size() - 1, opened.data()));
  // A body-less error answer is authenticated all the same.
  n = EncodeError(Ids(4), WireError::kBusy, &h);
  REQUIRE(SealWire(key, &h, n, nullptr, 0, nullptr));
  CHECK(OpenWire(key, h.data(), n, 9, nullptr, 0, nullptr));
  h[32] = static_cast<uint8_t>(WireError::kStale);
  CHECK_FALSE(OpenWire(key, h.data(), n, 9, nullptr, 0, nullptr));
}

TEST_CASE("peer wire: malformed headers are refused", "[peer]") {
  WireHeader h;
  PeerMessage m;
  size_t n = EncodeError(Ids(6), WireError::kBusy, &h);
  WireHeader bad = h;
  bad[0] ^= 1;
  CHECK(DecodeHeader(bad.data(), n, 0, &m) == WireStatus::kBadMagic);
  bad = h;
  bad[4] = kWireVersion + 1;  // a future version
  CHECK(DecodeHeader(bad.data(), n, 0, &m) == WireStatus::kBadVersion);
  bad[4] = 2;  // the version before offers and kIfResident
  CHECK(DecodeHeader(bad.data(), n, 0, &m) == WireStatus::kBadVersion);
  bad = h;
  bad[5] = 11;  // after kLeaving
  CHECK(DecodeHeader(bad.data(), n, 0, &m) == WireStatus::kBadType);
  bad = h;
  bad[6] = 1;  // flags: none on an error answer
  CHECK(DecodeHeader(bad.data(), n, 0, &m) == WireStatus::kBadHeader);
  // A request may carry kIfResident, and nothing else.
  WireHeader req;
  size_t rn = EncodeRequest(Ids(2), Ref("x", 10, 0), 100, &req, kIfResident);
  REQUIRE(DecodeHeader(req.data(), rn, 1, &m) == WireStatus::kOk);
  CHECK(m.flags == kIfResident);
  req[6] = 2;
  CHECK(DecodeHeader(req.data(), rn, 1, &m) == WireStatus::kBadHeader);
  req[6] = 0;
  req[7] = 0x80;
  CHECK(DecodeHeader(req.data(), rn, 1, &m) == WireStatus::kBadHeader);
  // An offer carries no flags and no range: whole chunks only.
  const ChunkRef whole = Ref("x", 10, 0);
  rn = EncodeOffer(Ids(0), whole, &req);
  REQUIRE(DecodeHeader(req.data(), rn, 11, &m) == WireStatus::kOk);
  WireHeader flagged = req;
  flagged[6] = kIfResident;
  CHECK(DecodeHeader(flagged.data(), rn, 11, &m) == WireStatus::kBadHeader);
  ChunkRef ranged = whole;
  ranged.range_off = 1;
  ranged.range_len = 2;
  WireHeader r2;
  size_t r2n = EncodeRequest(Ids(0), ranged, 1, &r2);
  r2[5] = static_cast<uint8_t>(MsgType::kOffer);  // a request's range under an offer's type
  CHECK(DecodeHeader(r2.data(), r2n, 11, &m) == WireStatus::kBadHeader);
  bad = h;
  bad[32] = 99;  // an unknown error code
  CHECK(DecodeHeader(bad.data(), n, 0, &m) == WireStatus::kBadHeader);
  bad = h;
  bad[32] = 0;  // kError carrying kOk
  CHECK(DecodeHeader(bad.data(), n, 0, &m) == WireStatus::kBadHeader);
  // Sizes: short, long, none.
  CHECK(DecodeHeader(h.data(), n - 1, 0, &m) == WireStatus::kBadHeader);
  CHECK(DecodeHeader(h.data(), n + 8, 0, &m) == WireStatus::kBadHeader);
  CHECK(DecodeHeader(h.data(), 3, 0, &m) == WireStatus::kBadHeader);
  CHECK(DecodeHeader(nullptr, 0, 0, &m) == WireStatus::kBadHeader);
}

TEST_CASE("peer wire: body lengths are bounded per type", "[peer]") {
  WireHeader h;
  PeerMessage m;
  size_t n = EncodeError(Ids(1), WireError::kIo, &h);
  CHECK(DecodeHeader(h.data(), n, 1, &m) == WireStatus::kBadBody);
  n = EncodeRequest(Ids(1), Ref("x", 10, 0), 1, &h);
  CHECK(DecodeHeader(h.data(), n, 0, &m) == WireStatus::kBadBody);
  CHECK(DecodeHeader(h.data(), n, kMaxPeerPath + 1, &m) == WireStatus::kBadBody);
  n = EncodeData(Ids(1), 100, &h);
  CHECK(DecodeHeader(h.data(), n, 99, &m) == WireStatus::kBadBody);
  n = EncodeData(Ids(1), kMaxWireChunk + 1, &h);
  CHECK(DecodeHeader(h.data(), n, kMaxWireChunk + 1, &m) == WireStatus::kBadBody);
  // An offer's body is its path, then exactly the chunk's bytes.
  n = EncodeOffer(Ids(0), Ref("a/b", 20 * kMiB, 2), &h);
  CHECK(DecodeHeader(h.data(), n, 3 + 4 * kMiB, &m) == WireStatus::kOk);
  CHECK(DecodeHeader(h.data(), n, 3 + 4 * kMiB - 1, &m) == WireStatus::kBadBody);
  CHECK(DecodeHeader(h.data(), n, 3 + 4 * kMiB + 1, &m) == WireStatus::kBadBody);
  CHECK(DecodeHeader(h.data(), n, 3, &m) == WireStatus::kBadBody);
  // ... of a chunk inside the file, of a size a node may use.
  n = EncodeOffer(Ids(0), Ref("a/b", 20 * kMiB, 3), &h);
  CHECK(DecodeHeader(h.data(), n, 3, &m) == WireStatus::kBadBody);
  ChunkRef huge = Ref("a/b", 20 * kMiB, 0);
  huge.chunk_size = kMaxWireChunk * 2;
  n = EncodeOffer(Ids(0), huge, &h);
  CHECK(DecodeHeader(h.data(), n, 3 + 20 * kMiB, &m) == WireStatus::kBadHeader);
}

TEST_CASE("peer wire: paths and chunk references", "[peer]") {
  CHECK(ValidPeerPath("train/n01440764/img_1.JPEG"));
  CHECK(ValidPeerPath("a"));
  for (std::string_view bad : {"", "/etc/passwd", "a//b", "a/", "./a", "a/../b", "..", "a/."}) {
    INFO(bad);
    CHECK_FALSE(ValidPeerPath(bad));
  }
  CHECK_FALSE(ValidPeerPath(std::string_view("a\0b", 3)));
  CHECK_FALSE(ValidPeerPath(std::string(256, 'x')));
  CHECK(ValidPeerPath(std::string(255, 'x')));
  CHECK_FALSE(ValidPeerPath(std::string(kMaxPeerPath + 1, 'x')));

  CHECK(ValidChunkRef(Ref("f", 20 * kMiB, 2)));
  CHECK(Ref("f", 20 * kMiB, 2).length() == 4 * kMiB);
  CHECK_FALSE(ValidChunkRef(Ref("f", 20 * kMiB, 3)));
  CHECK_FALSE(ValidChunkRef(Ref("f", 16 * kMiB, 2)));
  CHECK(ValidChunkRef(Ref("f", 0, 0)));
  CHECK(Ref("f", 0, 0).length() == 0);
  ChunkRef tiny = Ref("f", 10, 0);
  tiny.chunk_size = 100;  // below kMinWireChunk
  CHECK_FALSE(ValidChunkRef(tiny));
  ChunkRef huge = Ref("f", UINT64_MAX, UINT32_MAX);  // no overflow at the edges
  CHECK(ValidChunkRef(huge));
  CHECK(huge.length() == 8 * kMiB);

  // A byte range inside the chunk: the last one of the file is 4 MiB.
  ChunkRef part = Ref("f", 20 * kMiB, 2);
  part.range_off = kMiB;
  part.range_len = 3 * kMiB;
  CHECK(ValidChunkRef(part));
  CHECK(part.length() == 3 * kMiB);
  CHECK(part.file_offset() == 17 * kMiB);
  part.range_len = 3 * kMiB + 1;  // past the chunk's end
  CHECK_FALSE(ValidChunkRef(part));
  part.range_off = 4 * kMiB;  // starts at the end
  part.range_len = 1;
  CHECK_FALSE(ValidChunkRef(part));
  part.range_off = UINT64_MAX;  // no overflow
  part.range_len = 2;
  CHECK_FALSE(ValidChunkRef(part));
  part.range_off = 1;  // an offset without a length
  part.range_len = 0;
  CHECK_FALSE(ValidChunkRef(part));
  ChunkRef empty_range = Ref("f", 0, 0);
  empty_range.range_len = 1;
  CHECK_FALSE(ValidChunkRef(empty_range));
}

TEST_CASE("peer wire: a request's range round-trips", "[peer]") {
  ChunkRef r = Ref("a/b", 20 * kMiB, 1);
  r.range_off = 12345;
  r.range_len = 678;
  WireHeader h;
  size_t n = EncodeRequest(Ids(9), r, 1, &h);
  CHECK(n == kMaxHeader);
  PeerMessage m;
  REQUIRE(DecodeHeader(h.data(), n, 3, &m) == WireStatus::kOk);
  CHECK(m.chunk.range_off == 12345);
  CHECK(m.chunk.range_len == 678);
  CHECK(m.chunk.chunk == 1);
}

TEST_CASE("peer claim: round trip and strict decoding", "[peer]") {
  PeerKey key{};
  key[31] = 7;
  PeerClaim c{PeerClaim::kAnswer, RandomNonce(), RandomNonce(), key, "job-1", "node-a", "node-b"};
  std::string e = EncodeClaim(c);
  PeerClaim d;
  REQUIRE(DecodeClaim(e, &d));
  CHECK((d.role == c.role && d.nonce == c.nonce && d.echo == c.echo && d.key == key));
  CHECK((d.job == "job-1" && d.from == "node-a" && d.to == "node-b"));
  CHECK(RandomNonce() != RandomNonce());

  CHECK_FALSE(DecodeClaim(e.substr(0, e.size() - 1), &d));  // truncated
  CHECK_FALSE(DecodeClaim(e + "x", &d));                    // trailing bytes
  std::string bad = e;
  bad[4] = 1;  // the version without a key
  CHECK_FALSE(DecodeClaim(bad, &d));
  bad = e;
  bad[5] = 3;  // role
  CHECK_FALSE(DecodeClaim(bad, &d));
  PeerClaim empty = c;
  empty.job.clear();
  CHECK_FALSE(DecodeClaim(EncodeClaim(empty), &d));
  PeerClaim nul = c;
  nul.from = std::string("a\0b", 3);
  CHECK_FALSE(DecodeClaim(EncodeClaim(nul), &d));
}

TEST_CASE(
    "wire: pings, pongs, byes and leavings are a bare header, unknown sessions map to ECONNRESET",
    "[peer]") {
  for (MsgType type : {MsgType::kPing, MsgType::kPong, MsgType::kBye, MsgType::kLeaving}) {
    WireHeader h;
    size_t n = EncodeBare(type, WireIds{42, 7, 9}, &h);
    CHECK(n == 48);
    PeerMessage m;
    REQUIRE(DecodeHeader(h.data(), n, 0, &m) == WireStatus::kOk);
    CHECK((m.type == type && m.request_id == 42 && m.session == 7 && m.seq == 9));
    CHECK(DecodeHeader(h.data(), n, 1, &m) == WireStatus::kBadBody);  // no body
    CHECK(DecodeHeader(h.data(), n + 8, 0, &m) == WireStatus::kBadHeader);
    WireHeader flagged = h;
    flagged[6] = 1;  // kIfResident is a request's only
    CHECK(DecodeHeader(flagged.data(), n, 0, &m) == WireStatus::kBadHeader);
  }
  CHECK(WireErrorToErrno(WireError::kUnknownSession) == -ECONNRESET);
  WireHeader h;
  size_t n = EncodeError(WireIds{1, 2, 3}, WireError::kUnknownSession, &h);
  PeerMessage m;
  REQUIRE(DecodeHeader(h.data(), n, 0, &m) == WireStatus::kOk);
  CHECK(m.error == WireError::kUnknownSession);
}

}  // namespace
}  // namespace tierfs
