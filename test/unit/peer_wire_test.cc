// The peer wire messages and the MUNGE claim payload: round trips, and
// strict decoding of everything else.
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <string>

#include "tiering/peer/peer_auth.h"
#include "tiering/peer/wire.h"

namespace tierfs {
namespace {

constexpr uint64_t kMiB = 1 << 20;

ChunkRef Ref(std::string_view path, uint64_t size, uint32_t chunk) {
  return ChunkRef{path, size, 1234567890123, 8 * kMiB, chunk};
}

TEST_CASE("peer wire: every message decodes to what was encoded", "[peer]") {
  WireHeader h;
  PeerMessage m;
  size_t n = EncodeRequest(77, Ref("a/b.jpg", 20 * kMiB, 2), &h);
  REQUIRE(DecodeHeader(h.data(), n, 7, &m) == WireStatus::kOk);
  CHECK(m.type == MsgType::kRequest);
  CHECK(m.request_id == 77);
  CHECK(m.chunk.file_size == 20 * kMiB);
  CHECK(m.chunk.mtime_ns == 1234567890123);
  CHECK(m.chunk.chunk_size == 8 * kMiB);
  CHECK(m.chunk.chunk == 2);

  n = EncodeData(5, 4 * kMiB, &h);
  REQUIRE(DecodeHeader(h.data(), n, 4 * kMiB, &m) == WireStatus::kOk);
  CHECK((m.type == MsgType::kData && m.length == 4 * kMiB && m.request_id == 5));

  n = EncodeError(6, WireError::kStale, &h);
  REQUIRE(DecodeHeader(h.data(), n, 0, &m) == WireStatus::kOk);
  CHECK((m.type == MsgType::kError && m.error == WireError::kStale));
  CHECK(WireErrorToErrno(m.error) == -ESTALE);

  n = EncodeHello(0, &h);
  REQUIRE(DecodeHeader(h.data(), n, 300, &m) == WireStatus::kOk);
  CHECK(m.type == MsgType::kHello);
  n = EncodeHelloAnswer(0, WireError::kOk, &h);
  REQUIRE(DecodeHeader(h.data(), n, 300, &m) == WireStatus::kOk);
  n = EncodeHelloAnswer(0, WireError::kDenied, &h);
  REQUIRE(DecodeHeader(h.data(), n, 0, &m) == WireStatus::kOk);
  CHECK(m.error == WireError::kDenied);
}

TEST_CASE("peer wire: malformed headers are refused", "[peer]") {
  WireHeader h;
  PeerMessage m;
  size_t n = EncodeError(6, WireError::kBusy, &h);
  WireHeader bad = h;
  bad[0] ^= 1;
  CHECK(DecodeHeader(bad.data(), n, 0, &m) == WireStatus::kBadMagic);
  bad = h;
  bad[4] = 2;  // a future version
  CHECK(DecodeHeader(bad.data(), n, 0, &m) == WireStatus::kBadVersion);
  bad = h;
  bad[5] = 9;
  CHECK(DecodeHeader(bad.data(), n, 0, &m) == WireStatus::kBadType);
  bad = h;
  bad[6] = 1;  // reserved
  CHECK(DecodeHeader(bad.data(), n, 0, &m) == WireStatus::kBadHeader);
  bad = h;
  bad[16] = 99;  // an unknown error code
  CHECK(DecodeHeader(bad.data(), n, 0, &m) == WireStatus::kBadHeader);
  bad = h;
  bad[16] = 0;  // kError carrying kOk
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
  size_t n = EncodeError(1, WireError::kIo, &h);
  CHECK(DecodeHeader(h.data(), n, 1, &m) == WireStatus::kBadBody);
  n = EncodeHello(1, &h);
  CHECK(DecodeHeader(h.data(), n, 0, &m) == WireStatus::kBadBody);
  CHECK(DecodeHeader(h.data(), n, kMaxCredential + 1, &m) == WireStatus::kBadBody);
  n = EncodeRequest(1, Ref("x", 10, 0), &h);
  CHECK(DecodeHeader(h.data(), n, 0, &m) == WireStatus::kBadBody);
  CHECK(DecodeHeader(h.data(), n, kMaxPeerPath + 1, &m) == WireStatus::kBadBody);
  n = EncodeData(1, 100, &h);
  CHECK(DecodeHeader(h.data(), n, 99, &m) == WireStatus::kBadBody);
  n = EncodeData(1, kMaxWireChunk + 1, &h);
  CHECK(DecodeHeader(h.data(), n, kMaxWireChunk + 1, &m) == WireStatus::kBadBody);
  n = EncodeHelloAnswer(1, WireError::kDenied, &h);
  CHECK(DecodeHeader(h.data(), n, 10, &m) == WireStatus::kBadBody);
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
  size_t n = EncodeRequest(9, r, &h);
  CHECK(n == kMaxHeader);
  PeerMessage m;
  REQUIRE(DecodeHeader(h.data(), n, 3, &m) == WireStatus::kOk);
  CHECK(m.chunk.range_off == 12345);
  CHECK(m.chunk.range_len == 678);
  CHECK(m.chunk.chunk == 1);
}

TEST_CASE("peer claim: round trip and strict decoding", "[peer]") {
  PeerClaim c{PeerClaim::kAnswer, RandomNonce(), RandomNonce(), "job-1", "node-a", "node-b"};
  std::string e = EncodeClaim(c);
  PeerClaim d;
  REQUIRE(DecodeClaim(e, &d));
  CHECK((d.role == c.role && d.nonce == c.nonce && d.echo == c.echo));
  CHECK((d.job == "job-1" && d.from == "node-a" && d.to == "node-b"));
  CHECK(RandomNonce() != RandomNonce());

  CHECK_FALSE(DecodeClaim(e.substr(0, e.size() - 1), &d));  // truncated
  CHECK_FALSE(DecodeClaim(e + "x", &d));                    // trailing bytes
  std::string bad = e;
  bad[4] = 2;  // version
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

}  // namespace
}  // namespace tierfs
