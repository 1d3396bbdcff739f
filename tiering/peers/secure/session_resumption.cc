#include "tiering/peers/secure/session_resumption.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kTicketLabel = "tierfs ticket id v1";
constexpr std::string_view kBinderLabel = "tierfs resume binder v1";
constexpr std::string_view kTranscriptLabel = "tierfs resume v1";

using Mac = std::array<uint8_t, 32>;

// HMAC-SHA256 of `data` under `key`; zeros only if libcrypto fails (then
// nothing verifies: a zero binder is refused like any wrong one).
Mac Hmac(const PeerKey& key, std::string_view data) {
  Mac out{};
  unsigned len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(),
           &len) == nullptr ||
      len != out.size()) {
    out.fill(0);
  }
  return out;
}

PeerKey BinderKey(const PeerKey& secret) { return Hmac(secret, kBinderLabel); }

template <typename T>
void Append(std::string* out, const T& bytes) {
  out->append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}
void AppendName(std::string* out, std::string_view s) {
  out->push_back(static_cast<char>(s.size() & 0xff));
  out->push_back(static_cast<char>(s.size() >> 8));
  *out += s;
}

// The binder of the Resume `frame` (its bytes up to the binder) for `greeting`.
Mac Binder(const PeerKey& secret, const PeerNonce& greeting, std::string_view frame) {
  std::string signed_part(kBinderLabel);
  Append(&signed_part, greeting);
  signed_part += frame.substr(0, frame.size() - sizeof(Mac));
  return Hmac(BinderKey(secret), signed_part);
}

std::string Transcript(const PeerNonce& greeting, const ResumeRequest& r,
                       const PeerKey& server_key) {
  std::string t(kTranscriptLabel);
  Append(&t, greeting);
  Append(&t, r.nonce);
  Append(&t, r.key);
  Append(&t, server_key);
  Append(&t, r.ticket);
  for (std::string_view s :
       {std::string_view(r.job), std::string_view(r.from), std::string_view(r.to)})
    AppendName(&t, s);
  return t;
}

}  // namespace

ResumeTicket TicketOf(const PeerKey& secret, Clock::time_point expires) {
  ResumeTicket t;
  const Mac id = Hmac(secret, kTicketLabel);
  std::memcpy(t.id.data(), id.data(), t.id.size());
  t.secret = secret;
  t.expires = expires;
  return t;
}

const char* ResumeRefusalKey(ResumeRefusal r) {
  switch (r) {
    case ResumeRefusal::kUnknown:
      return "unknown";
    case ResumeRefusal::kExpired:
      return "expired";
    case ResumeRefusal::kReplayed:
      return "replayed";
    case ResumeRefusal::kForged:
      return "forged";
    case ResumeRefusal::kWrongJob:
      return "wrong_job";
    case ResumeRefusal::kWrongPeer:
      return "wrong_peer";
  }
  return "unknown";
}

bool StartResume(const ResumeTicket& ticket, const PeerNonce& greeting, uint64_t solution,
                 const PeerIdentity& self, const std::string& server, ResumeAttempt* out) {
  if (!NewPeerKeyPair(&out->mine)) return false;
  ResumeRequest& r = out->request;
  r.solution = solution;
  r.ticket = ticket.id;
  r.nonce = RandomNonce();
  r.key = out->mine.pub;
  r.job = self.job;
  r.from = self.name;
  r.to = server;
  r.binder.fill(0);
  out->frame = EncodeResumeFrame(r);
  if (out->frame.empty()) return false;
  r.binder = Binder(ticket.secret, greeting, out->frame);
  std::memcpy(out->frame.data() + out->frame.size() - r.binder.size(), r.binder.data(),
              r.binder.size());
  return true;
}

bool ResumedKeys(const ResumeTicket& ticket, const PeerNonce& greeting,
                 const ResumeAttempt& attempt, const PeerKey& server_key, SessionKeys* out) {
  return DeriveSessionKeys(attempt.mine.priv, server_key,
                           Transcript(greeting, attempt.request, server_key), /*client=*/true, out,
                           &ticket.secret);
}

TicketStore::TicketStore(size_t capacity, std::chrono::seconds lifetime)
    : capacity_(capacity == 0 ? 1 : capacity), lifetime_(lifetime) {}

void TicketStore::Drop(Clock::time_point now, size_t keep) {
  while (!order_.empty()) {
    const auto [id, expires] = order_.front();
    auto it = tickets_.find(id);
    const bool live = it != tickets_.end() && it->second.expires == expires;
    if (live && now <= expires && tickets_.size() <= keep) break;
    if (live) {
      if (now <= expires && !it->second.spent) evicted_++;
      tickets_.erase(it);
    }
    order_.pop_front();
  }
  size_ = tickets_.size();
}

void TicketStore::Issue(const PeerKey& secret, const std::string& peer) {
  const auto now = Clock::now();
  const ResumeTicket t = TicketOf(secret, now + lifetime_);
  Drop(now, capacity_ - 1);  // room for one more: the expired go, then the oldest
  tickets_[t.id] = Entry{secret, peer, t.expires, false};
  order_.emplace_back(t.id, t.expires);
  size_ = tickets_.size();
}

TicketStore::Resumed TicketStore::Resume(const PeerIdentity& self, const PeerNonce& greeting,
                                         std::string_view frame, const ResumeRequest& r) {
  Resumed out;
  const auto now = Clock::now();
  // Expired tickets are dropped as new ones are filed: one found here is
  // refused as expired.
  auto refuse = [&out](ResumeRefusal why) {
    out.refusal = why;
    return out;
  };
  if (r.job != self.job) return refuse(ResumeRefusal::kWrongJob);
  if (r.to != self.name) return refuse(ResumeRefusal::kWrongPeer);
  auto it = tickets_.find(r.ticket);
  if (it == tickets_.end()) return refuse(ResumeRefusal::kUnknown);
  Entry& e = it->second;
  if (e.spent) return refuse(ResumeRefusal::kReplayed);
  if (now > e.expires) return refuse(ResumeRefusal::kExpired);
  if (r.from != e.peer) return refuse(ResumeRefusal::kWrongPeer);
  const Mac want = Binder(e.secret, greeting, frame);
  if (CRYPTO_memcmp(want.data(), r.binder.data(), want.size()) != 0) {
    return refuse(ResumeRefusal::kForged);  // unspent: a forger cannot burn it
  }
  PeerKeyPair mine;
  if (!NewPeerKeyPair(&mine) ||
      !DeriveSessionKeys(mine.priv, r.key, Transcript(greeting, r, mine.pub), /*client=*/false,
                         &out.keys, &e.secret)) {
    return refuse(ResumeRefusal::kForged);
  }
  out.peer = e.peer;
  out.server_key = mine.pub;
  e.spent = true;
  e.secret.fill(0);
  return out;
}

}  // namespace tierfs
