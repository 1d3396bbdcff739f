#include "tiering/peers/transport/wire.h"

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

namespace tierfs {
namespace {

constexpr size_t kCommon = 32;
constexpr size_t kBare = kCommon + kWireTag;
constexpr size_t kWithError = kCommon + 8 + kWireTag;
constexpr size_t kRequestSize = kCommon + 64 + kWireTag;
static_assert(kRequestSize == kMaxHeader);

// Little-endian field writer and reader over a header buffer.
class Writer {
 public:
  explicit Writer(WireHeader* h) : p_(h->data()) {}
  Writer& U8(uint8_t v) { return Le(v, 1); }
  Writer& U16(uint16_t v) { return Le(v, 2); }
  Writer& U32(uint32_t v) { return Le(v, 4); }
  Writer& U64(uint64_t v) { return Le(v, 8); }
  // The tag's place, zero until SealWire; the header's size.
  size_t Tag() {
    for (size_t i = 0; i < kWireTag; ++i) p_[n_++] = 0;
    return n_;
  }

 private:
  Writer& Le(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) p_[n_++] = static_cast<uint8_t>(v >> (8 * i));
    return *this;
  }
  uint8_t* p_;
  size_t n_ = 0;
};

// The caller checks the size before reading past the common part.
class Reader {
 public:
  explicit Reader(const void* p) : p_(static_cast<const uint8_t*>(p)) {}
  uint64_t Le(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{p_[n_++]} << (8 * i);
    return v;
  }

 private:
  const uint8_t* p_;
  size_t n_ = 0;
};

Writer Common(MsgType type, const WireIds& ids, WireHeader* h, uint16_t flags = 0) {
  Writer w(h);
  w.U32(kWireMagic).U8(kWireVersion).U8(static_cast<uint8_t>(type)).U16(flags).U64(ids.request_id);
  w.U64(ids.session).U64(ids.seq);
  return w;
}

size_t HeaderSize(MsgType type) {
  switch (type) {
    case MsgType::kData:
    case MsgType::kError:
      return kWithError;
    case MsgType::kRequest:
    case MsgType::kOffer:
      return kRequestSize;
    case MsgType::kPing:
    case MsgType::kPong:
    case MsgType::kBye:
    case MsgType::kLeaving:
      return kBare;
  }
  return 0;
}

// The wire's errors and the host's errno, both ways.
constexpr std::pair<WireError, int> kErrnos[] = {
    {WireError::kOk, 0},
    {WireError::kNotFound, -ENOENT},
    {WireError::kStale, -ESTALE},
    {WireError::kBadRequest, -EINVAL},
    {WireError::kBusy, -EBUSY},
    {WireError::kIo, -EIO},
    {WireError::kDenied, -EACCES},
    {WireError::kShutdown, -ESHUTDOWN},
    {WireError::kNotResident, -ENODATA},
    {WireError::kUnknownSession, -ECONNRESET},
};

bool BodyFits(const PeerMessage& m, uint64_t body) {
  switch (m.type) {
    case MsgType::kRequest:
      return body >= 1 && body <= kMaxPeerPath;
    case MsgType::kData:
      return m.length <= kMaxWireChunk && body == m.length;
    case MsgType::kError:
    case MsgType::kPing:
    case MsgType::kPong:
    case MsgType::kBye:
    case MsgType::kLeaving:
      return body == 0;
    case MsgType::kOffer:
      // The path, then the whole chunk as the header describes it.
      return m.path_len >= 1 && m.path_len <= kMaxPeerPath && m.chunk.chunk_length() > 0 &&
             m.chunk.chunk_length() <= kMaxWireChunk &&
             body == uint64_t{m.path_len} + m.chunk.chunk_length();
  }
  return false;
}

}  // namespace

int WireErrorToErrno(WireError e) {
  for (const auto& [wire, err] : kErrnos) {
    if (wire == e) return err;
  }
  return -EIO;
}

WireError WireErrorFromErrno(int neg_errno) {
  for (const auto& [wire, err] : kErrnos) {
    if (err == neg_errno) return wire;
  }
  return WireError::kIo;
}

uint64_t ChunkRef::chunk_length() const {
  if (offset() >= file_size) return 0;
  uint64_t rest = file_size - offset();
  return rest < chunk_size ? rest : chunk_size;
}

bool ValidPeerPath(std::string_view path) {
  if (path.empty() || path.size() > kMaxPeerPath) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part.empty() || part.size() > 255 || part == "." || part == "..") return false;
    if (part.find('\0') != std::string_view::npos) return false;
    start = end + 1;
  }
  return true;
}

bool ValidChunkRef(const ChunkRef& ref) {
  if (!ValidPeerPath(ref.path)) return false;
  if (ref.chunk_size < kMinWireChunk || ref.chunk_size > kMaxWireChunk) return false;
  if (ref.file_size == 0) return ref.chunk == 0 && ref.range_off == 0 && ref.range_len == 0;
  // chunk * chunk_size < file_size, without overflow.
  uint64_t chunks = ref.file_size / ref.chunk_size + (ref.file_size % ref.chunk_size != 0);
  if (ref.chunk >= chunks) return false;
  if (ref.range_len == 0) return ref.range_off == 0;
  uint64_t in_chunk = ref.chunk_length();
  return ref.range_off < in_chunk && ref.range_len <= in_chunk - ref.range_off;
}

const char* WireStatusName(WireStatus s) {
  switch (s) {
    case WireStatus::kOk:
      return "ok";
    case WireStatus::kBadMagic:
      return "bad magic";
    case WireStatus::kBadVersion:
      return "unknown version";
    case WireStatus::kBadType:
      return "unknown type";
    case WireStatus::kBadHeader:
      return "malformed header";
    case WireStatus::kBadBody:
      return "body length out of bounds";
  }
  return "?";
}

namespace {
// A kRequest's or kOffer's fields after the common part; `word` is the
// request's timeout or the offer's path length.
size_t ChunkFields(Writer w, const ChunkRef& ref, uint32_t word, uint64_t off, uint64_t len) {
  return w.U64(ref.file_size)
      .U64(static_cast<uint64_t>(ref.mtime_ns))
      .U64(static_cast<uint64_t>(ref.ctime_ns))
      .U64(ref.ino)
      .U64(ref.chunk_size)
      .U32(ref.chunk)
      .U32(word)
      .U64(off)
      .U64(len)
      .Tag();
}
}  // namespace

size_t EncodeRequest(const WireIds& ids, const ChunkRef& ref, uint32_t timeout_ms, WireHeader* h,
                     uint16_t flags) {
  return ChunkFields(Common(MsgType::kRequest, ids, h, flags), ref, timeout_ms, ref.range_off,
                     ref.range_len);
}

size_t EncodeOffer(const WireIds& ids, const ChunkRef& ref, WireHeader* h) {
  return ChunkFields(Common(MsgType::kOffer, ids, h), ref, static_cast<uint32_t>(ref.path.size()),
                     0, 0);
}

size_t EncodeData(const WireIds& ids, uint64_t length, WireHeader* h) {
  return Common(MsgType::kData, ids, h).U64(length).Tag();
}

size_t EncodeError(const WireIds& ids, WireError error, WireHeader* h) {
  return Common(MsgType::kError, ids, h).U32(static_cast<uint32_t>(error)).U32(0).Tag();
}

size_t EncodeBare(MsgType type, const WireIds& ids, WireHeader* h) {
  return Common(type, ids, h).Tag();
}

bool SealWire(const PeerKey& key, WireHeader* h, size_t header_size, const void* body, size_t size,
              void* out) {
  if (header_size < kCommon + kWireTag || header_size > h->size()) return false;
  Reader r(h->data() + 24);
  uint64_t seq = r.Le(8);
  std::string_view aad(reinterpret_cast<const char*>(h->data()), header_size - kWireTag);
  PeerTag tag;
  if (!MacMessage(key, seq, aad, body, size, &tag)) return false;
  std::memcpy(h->data() + header_size - kWireTag, tag.data(), kWireTag);
  if (out != nullptr && out != body && size > 0) std::memcpy(out, body, size);
  return true;
}

bool OpenWire(const PeerKey& key, const void* header, size_t header_size, uint64_t seq,
              const void* body, size_t size, void* out) {
  if (header_size < kCommon + kWireTag) return false;
  const char* p = static_cast<const char*>(header);
  PeerTag tag;
  std::memcpy(tag.data(), p + header_size - kWireTag, kWireTag);
  if (!CheckMessageMac(key, seq, std::string_view(p, header_size - kWireTag), body, size, tag)) {
    return false;
  }
  if (out != nullptr && out != body && size > 0) std::memcpy(out, body, size);
  return true;
}

WireStatus DecodeHeader(const void* header, size_t size, uint64_t body_size, PeerMessage* out) {
  if (header == nullptr || size < kCommon) return WireStatus::kBadHeader;
  Reader r(header);
  if (r.Le(4) != kWireMagic) return WireStatus::kBadMagic;
  if (r.Le(1) != kWireVersion) return WireStatus::kBadVersion;
  uint64_t type = r.Le(1);
  if (type < 3 || type > 10) return WireStatus::kBadType;
  PeerMessage m;
  m.type = static_cast<MsgType>(type);
  m.flags = static_cast<uint16_t>(r.Le(2));
  const uint16_t allowed = m.type == MsgType::kRequest ? kIfResident : 0;
  if ((m.flags & ~allowed) != 0 || size != HeaderSize(m.type)) return WireStatus::kBadHeader;
  m.request_id = r.Le(8);
  m.session = r.Le(8);
  m.seq = r.Le(8);
  switch (m.type) {
    case MsgType::kError: {
      auto code = static_cast<int32_t>(static_cast<uint32_t>(r.Le(4)));
      if (code < 0 || code > kMaxWireError || r.Le(4) != 0) return WireStatus::kBadHeader;
      m.error = static_cast<WireError>(code);
      if (m.error == WireError::kOk) return WireStatus::kBadHeader;
      break;
    }
    case MsgType::kRequest:
    case MsgType::kOffer: {
      m.chunk.file_size = r.Le(8);
      m.chunk.mtime_ns = static_cast<int64_t>(r.Le(8));
      m.chunk.ctime_ns = static_cast<int64_t>(r.Le(8));
      m.chunk.ino = r.Le(8);
      m.chunk.chunk_size = r.Le(8);
      m.chunk.chunk = static_cast<uint32_t>(r.Le(4));
      const auto word = static_cast<uint32_t>(r.Le(4));
      m.chunk.range_off = r.Le(8);
      m.chunk.range_len = r.Le(8);
      if (m.type == MsgType::kRequest) {
        m.timeout_ms = word;
      } else {
        m.path_len = word;
        if (m.chunk.range_off != 0 || m.chunk.range_len != 0) return WireStatus::kBadHeader;
        // chunk_length() multiplies chunk by chunk_size: bound them first.
        if (m.chunk.chunk_size < kMinWireChunk || m.chunk.chunk_size > kMaxWireChunk)
          return WireStatus::kBadHeader;
      }
      break;
    }
    case MsgType::kData:
      m.length = r.Le(8);
      break;
    case MsgType::kPing:
    case MsgType::kPong:
    case MsgType::kBye:
    case MsgType::kLeaving:
      break;
  }
  if (!BodyFits(m, body_size)) return WireStatus::kBadBody;
  *out = m;
  return WireStatus::kOk;
}

}  // namespace tierfs
