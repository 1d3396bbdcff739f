#include "tiering/peers/secure/peer_auth.h"

#include <fmt/format.h>
#include <munge.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>

namespace tierfs {
namespace {

constexpr uint32_t kClaimMagic = 0x41534654;  // "TFSA" in little-endian order
constexpr uint8_t kClaimVersion = 2;

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

// Reads fields from the front of `data`; any read past its end fails.
class ClaimReader {
 public:
  explicit ClaimReader(std::string_view data) : data_(data) {}
  bool Le(int bytes, uint64_t* v) {
    if (data_.size() < static_cast<size_t>(bytes)) return false;
    *v = 0;
    for (int i = 0; i < bytes; ++i) *v |= uint64_t{static_cast<uint8_t>(data_[i])} << (8 * i);
    data_.remove_prefix(bytes);
    return true;
  }
  template <size_t N>
  bool Bytes(std::array<uint8_t, N>* n) {
    if (data_.size() < N) return false;
    std::memcpy(n->data(), data_.data(), N);
    data_.remove_prefix(N);
    return true;
  }
  // A u16 length (1..kMaxClaimField) and that many bytes, no NUL.
  bool Field(std::string* s) {
    uint64_t n = 0;
    if (!Le(2, &n) || n == 0 || n > kMaxClaimField || data_.size() < n) return false;
    std::string_view v = data_.substr(0, n);
    if (v.find('\0') != std::string_view::npos) return false;
    s->assign(v);
    data_.remove_prefix(n);
    return true;
  }
  bool done() const { return data_.empty(); }

 private:
  std::string_view data_;
};

struct MungeCtx {
  void operator()(munge_ctx_t c) const { munge_ctx_destroy(c); }
};
using MungeCtxPtr = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, MungeCtx>;

// A context for one call (a munge_ctx_t is not thread-safe) on munged's socket.
Result<MungeCtxPtr> NewContext(const std::string& socket) {
  MungeCtxPtr ctx(munge_ctx_create());
  if (!ctx) return Status::Error(ENOMEM, "munge_ctx_create failed");
  if (!socket.empty() && munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str()) != 0) {
    return Status::Error(EINVAL,
                         fmt::format("munge socket {}: {}", socket, munge_ctx_strerror(ctx.get())));
  }
  return ctx;
}

// By AuthVerdict: what people read, and the counter's name.
constexpr struct {
  const char* name;
  const char* key;
} kVerdicts[] = {
    {"ok", "ok"},
    {"invalid credential", "invalid"},
    {"expired credential", "expired"},
    {"replayed credential", "replayed"},
    {"another user", "wrong_user"},
    {"another job", "wrong_job"},
    {"wrong peer", "wrong_peer"},
    {"munged unavailable", "unavailable"},
};
static_assert(std::size(kVerdicts) == static_cast<size_t>(AuthVerdict::kUnavailable) + 1);

AuthVerdict VerdictOf(munge_err_t e) {
  switch (e) {
    case EMUNGE_SUCCESS:
      return AuthVerdict::kOk;
    case EMUNGE_CRED_REPLAYED:
      return AuthVerdict::kReplayed;
    case EMUNGE_CRED_EXPIRED:
    case EMUNGE_CRED_REWOUND:
      return AuthVerdict::kExpired;
    case EMUNGE_SNAFU:
    case EMUNGE_NO_MEMORY:
    case EMUNGE_SOCKET:
    case EMUNGE_TIMEOUT:
      return AuthVerdict::kUnavailable;
    default:  // bad format, version, cipher, MAC, realm; invalid; not ours to decode
      return AuthVerdict::kInvalid;
  }
}

}  // namespace

std::string EncodeClaim(const PeerClaim& c) {
  std::string out;
  PutLe(&out, kClaimMagic, 4);
  PutLe(&out, kClaimVersion, 1);
  PutLe(&out, c.role, 1);
  PutLe(&out, 0, 2);
  out.append(reinterpret_cast<const char*>(c.nonce.data()), c.nonce.size());
  out.append(reinterpret_cast<const char*>(c.echo.data()), c.echo.size());
  out.append(reinterpret_cast<const char*>(c.key.data()), c.key.size());
  for (const std::string* s : {&c.job, &c.from, &c.to}) {
    PutLe(&out, s->size(), 2);
    out += *s;
  }
  return out;
}

bool DecodeClaim(std::string_view data, PeerClaim* out) {
  ClaimReader r(data);
  uint64_t magic = 0, version = 0, role = 0, reserved = 0;
  PeerClaim c;
  if (!r.Le(4, &magic) || magic != kClaimMagic || !r.Le(1, &version) || version != kClaimVersion ||
      !r.Le(1, &role) || (role != PeerClaim::kHello && role != PeerClaim::kAnswer) ||
      !r.Le(2, &reserved) || reserved != 0 || !r.Bytes(&c.nonce) || !r.Bytes(&c.echo) ||
      !r.Bytes(&c.key) || !r.Field(&c.job) || !r.Field(&c.from) || !r.Field(&c.to) || !r.done()) {
    return false;
  }
  c.role = static_cast<PeerClaim::Role>(role);
  *out = std::move(c);
  return true;
}

PeerNonce RandomNonce() {
  PeerNonce n{};
  size_t got = 0;
  while (got < n.size()) {
    ssize_t r = ::getrandom(n.data() + got, n.size() - got, 0);
    if (r > 0)
      got += static_cast<size_t>(r);
    else if (errno != EINTR)
      std::abort();  // no kernel randomness: nothing safe to do
  }
  return n;
}

const char* AuthVerdictName(AuthVerdict v) { return kVerdicts[static_cast<int>(v)].name; }
const char* AuthVerdictKey(AuthVerdict v) { return kVerdicts[static_cast<int>(v)].key; }

namespace {

class Munge final : public Credentials {
 public:
  explicit Munge(std::string socket) : socket_(std::move(socket)) {}

  Result<std::string> Encode(std::string_view payload, uid_t uid, int ttl_s) const override {
    Result<MungeCtxPtr> ctx = NewContext(socket_);
    if (!ctx.ok()) return ctx.status();
    if (munge_ctx_set(ctx->get(), MUNGE_OPT_TTL, ttl_s) != 0 ||
        munge_ctx_set(ctx->get(), MUNGE_OPT_UID_RESTRICTION, uid) != 0) {
      return Status::Error(EINVAL,
                           fmt::format("munge options: {}", munge_ctx_strerror(ctx->get())));
    }
    char* out = nullptr;
    munge_err_t e =
        munge_encode(&out, ctx->get(), payload.data(), static_cast<int>(payload.size()));
    if (e != EMUNGE_SUCCESS) {
      std::free(out);
      return Status::Error(EIO, fmt::format("munge_encode: {}", munge_ctx_strerror(ctx->get())));
    }
    std::string cred(out);
    std::free(out);
    return cred;
  }

  Decoded Decode(std::string_view cred) const override {
    Decoded d;
    if (cred.empty() || cred.find('\0') != std::string_view::npos) {
      d.detail = "not a credential";
      return d;
    }
    Result<MungeCtxPtr> ctx = NewContext(socket_);
    if (!ctx.ok()) {
      d.verdict = AuthVerdict::kUnavailable;
      d.detail = ctx.status().message();
      return d;
    }
    std::string text(cred);  // munge_decode wants a C string
    void* payload = nullptr;
    int length = 0;
    munge_err_t e = munge_decode(text.c_str(), ctx->get(), &payload, &length, &d.uid, &d.gid);
    if (payload != nullptr && length > 0)
      d.payload.assign(static_cast<const char*>(payload), length);
    std::free(payload);
    d.verdict = VerdictOf(e);
    if (e != EMUNGE_SUCCESS)
      d.detail = fmt::format("munge_decode: {}", munge_ctx_strerror(ctx->get()));
    return d;
  }

 private:
  const std::string socket_;
};

}  // namespace

std::unique_ptr<const Credentials> MungeCredentials(std::string munge_socket) {
  return std::make_unique<Munge>(std::move(munge_socket));
}

PeerAuth::PeerAuth(PeerIdentity self, std::string munge_socket, int ttl_s)
    : PeerAuth(std::move(self), MungeCredentials(std::move(munge_socket)), ttl_s) {}

PeerAuth::PeerAuth(PeerIdentity self, std::unique_ptr<const Credentials> credentials, int ttl_s)
    : self_(std::move(self)), credentials_(std::move(credentials)), ttl_s_(ttl_s) {}

Result<std::string> PeerAuth::Make(const PeerClaim& claim) const {
  return credentials_->Encode(EncodeClaim(claim), self_.uid, ttl_s_);
}

AuthCheck PeerAuth::Check(std::string_view cred, PeerClaim::Role role) const {
  AuthCheck out;
  Credentials::Decoded d = credentials_->Decode(cred);
  if (d.verdict != AuthVerdict::kOk) {
    out.verdict = d.verdict;
    out.detail = std::move(d.detail);
    return out;
  }
  if (d.uid != self_.uid || d.gid != self_.gid) {
    out.verdict = AuthVerdict::kWrongUser;
    out.detail =
        fmt::format("made by uid {} gid {}, expected {} {}", d.uid, d.gid, self_.uid, self_.gid);
    return out;
  }
  PeerClaim c;
  if (!DecodeClaim(d.payload, &c) || c.role != role) {
    out.detail = "not a tierfs peer claim of the expected role";
    return out;
  }
  if (c.job != self_.job) {
    out.verdict = AuthVerdict::kWrongJob;
    out.detail = fmt::format("job \"{}\", expected \"{}\"", c.job, self_.job);
    return out;
  }
  if (c.to != self_.name) {
    out.verdict = AuthVerdict::kWrongPeer;
    out.detail = fmt::format("addressed to \"{}\", this is \"{}\"", c.to, self_.name);
    return out;
  }
  out.verdict = AuthVerdict::kOk;
  out.claim = std::move(c);
  return out;
}

}  // namespace tierfs
