// The cryptography of a peer connection, over OpenSSL's libcrypto:
//
// - An ephemeral X25519 key pair per connection attempt. Each side's public
//   key travels inside its MUNGE credential (tiering/peers/secure/peer_auth.h), so
//   a key that reaches us was made by the daemon's uid on a node of the
//   cluster, for this connection (the credential binds the other side's
//   nonce).
// - SessionKeys: HKDF-SHA256 of the X25519 secret, salted with the
//   handshake's transcript (both nonces, both public keys, the job and
//   both names): one key per direction, and a resumption secret that
//   never travels (session_resumption.h). Nobody who only saw the
//   handshake, or replayed a part of it, can compute them. A resumed
//   session's come from a fresh X25519 secret and the previous session's
//   resumption secret together.
// - Every later message carries a GMAC tag (AES-256-GCM with the whole
//   message as additional data: header and body authenticated, the body in
//   clear) under its direction's key: a MAC at memory speed, so a chunk
//   goes from a tier to the wire without a copy. The 96-bit IV is the
//   message's sequence number, which the header carries; the receiver's
//   ReplayWindow accepts each number once (a forged, replayed or altered
//   message fails; a reordered one is accepted once if it is within the
//   window, since UCX does not keep eager and rendezvous messages in
//   order). The handshake's last two frames are encrypted as well
//   (SealMessage).
#pragma once

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tierfs {

using PeerKey = std::array<uint8_t, 32>;
using PeerTag = std::array<uint8_t, 16>;

struct PeerKeyPair {
  PeerKey pub{};
  PeerKey priv{};
};

// A fresh key pair. False only if libcrypto fails (no randomness).
bool NewPeerKeyPair(PeerKeyPair* out);

// The keys of one connection, as one side sees them.
struct SessionKeys {
  PeerKey send{};
  PeerKey recv{};
  PeerKey resume{};  // the resumption secret: the same on both sides, never sent
};

// Derives the connection's keys from this side's private key, the other
// side's public key and the transcript (and `resumed`'s resumption
// secret, when resuming). `client` says which direction is ours to send.
// False if the other key is invalid (a low-order point).
bool DeriveSessionKeys(const PeerKey& my_priv, const PeerKey& their_pub,
                       std::string_view transcript, bool client, SessionKeys* out,
                       const PeerKey* resumed = nullptr);

// Seals `body` under `key` with sequence number `seq`, authenticating `aad`
// too: the ciphertext goes to `out` (body.size() bytes; it may be
// body.data() itself) and the tag to *tag. False if libcrypto fails.
bool SealMessage(const PeerKey& key, uint64_t seq, std::string_view aad, const void* body,
                 size_t size, void* out, PeerTag* tag);
// The tag of `aad` followed by `body` under `key` and `seq` (nothing
// encrypted). False if libcrypto fails.
bool MacMessage(const PeerKey& key, uint64_t seq, std::string_view aad, const void* body,
                size_t size, PeerTag* tag);
// Whether `tag` is MacMessage's for these bytes (compared in constant time).
bool CheckMessageMac(const PeerKey& key, uint64_t seq, std::string_view aad, const void* body,
                     size_t size, const PeerTag& tag);

// Opens what SealMessage made: `size` bytes of `in` are decrypted into
// `out` (which may be `in`). False if the tag does not match: `out` then
// holds no promise and must not be used.
bool OpenMessage(const PeerKey& key, uint64_t seq, std::string_view aad, const void* in,
                 size_t size, void* out, const PeerTag& tag);

// Which sequence numbers were seen: each is accepted once, and one more
// than kWindow below the highest seen is refused. Not thread-safe.
class ReplayWindow {
 public:
  static constexpr uint64_t kWindow = 1024;
  // True (and recorded) if `seq` was not seen and is not too old. 0 is
  // never accepted: it is the handshake's.
  bool Accept(uint64_t seq);

 private:
  uint64_t highest_ = 0;
  std::bitset<kWindow> seen_;  // bit seq % kWindow, for seq in (highest_ - kWindow, highest_]
};

}  // namespace tierfs
