#include "tiering/peers/transport/peer_crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace tierfs {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* c) const { EVP_PKEY_CTX_free(c); }
};
struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;

constexpr char kInfo[] = "tierfs peer session v2";
// EVP's lengths are ints: bodies are fed in pieces of this size.
constexpr size_t kPiece = size_t{1} << 30;

// One cipher context per thread, reused: sealing is on the hot path of
// every peer transfer.
EVP_CIPHER_CTX* ThreadCipher() {
  thread_local std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree> ctx(EVP_CIPHER_CTX_new());
  return ctx.get();
}

std::array<uint8_t, 12> Iv(uint64_t seq) {
  std::array<uint8_t, 12> iv{};
  for (int i = 0; i < 8; ++i) iv[4 + i] = static_cast<uint8_t>(seq >> (8 * i));
  return iv;
}

// Feeds `size` bytes through an initialised context (aad when out is null).
bool Update(EVP_CIPHER_CTX* ctx, bool encrypt, const uint8_t* in, size_t size, uint8_t* out) {
  while (size > 0) {
    int n = static_cast<int>(std::min(size, kPiece));
    int done = 0;
    int ok = encrypt ? EVP_EncryptUpdate(ctx, out, &done, in, n)
                     : EVP_DecryptUpdate(ctx, out, &done, in, n);
    if (ok != 1) return false;
    in += n;
    if (out != nullptr) out += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool Crypt(bool encrypt, const PeerKey& key, uint64_t seq, std::string_view aad, const void* in,
           size_t size, void* out, PeerTag* tag) {
  EVP_CIPHER_CTX* ctx = ThreadCipher();
  if (ctx == nullptr) return false;
  auto iv = Iv(seq);
  int ok = encrypt ? EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), iv.data())
                   : EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), iv.data());
  if (ok != 1) return false;
  if (!Update(ctx, encrypt, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(), nullptr) ||
      !Update(ctx, encrypt, static_cast<const uint8_t*>(in), size, static_cast<uint8_t*>(out))) {
    return false;
  }
  int last = 0;
  uint8_t end[16];
  if (encrypt) {
    return EVP_EncryptFinal_ex(ctx, end, &last) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag->data()) == 1;
  }
  return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, tag->data()) == 1 &&
         EVP_DecryptFinal_ex(ctx, end, &last) == 1;
}

}  // namespace

bool NewPeerKeyPair(PeerKeyPair* out) {
  PkeyCtx ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    return false;
  }
  Pkey key(raw);
  size_t pub = out->pub.size(), priv = out->priv.size();
  return EVP_PKEY_get_raw_public_key(key.get(), out->pub.data(), &pub) == 1 &&
         EVP_PKEY_get_raw_private_key(key.get(), out->priv.data(), &priv) == 1 && pub == 32 &&
         priv == 32;
}

bool DeriveSessionKeys(const PeerKey& my_priv, const PeerKey& their_pub,
                       std::string_view transcript, bool client, SessionKeys* out,
                       const PeerKey* resumed) {
  Pkey mine(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, my_priv.data(), 32));
  Pkey theirs(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, their_pub.data(), 32));
  if (!mine || !theirs) return false;
  PkeyCtx dh(EVP_PKEY_CTX_new(mine.get(), nullptr));
  uint8_t secret[64];  // the X25519 secret, then the resumption secret if resuming
  size_t secret_len = 32;
  if (!dh || EVP_PKEY_derive_init(dh.get()) != 1 ||
      EVP_PKEY_derive_set_peer(dh.get(), theirs.get()) != 1 ||
      EVP_PKEY_derive(dh.get(), secret, &secret_len) != 1 || secret_len != 32) {
    return false;  // OpenSSL refuses an all-zero result (a low-order point)
  }
  if (resumed != nullptr) {
    std::memcpy(secret + 32, resumed->data(), 32);
    secret_len = 64;
  }
  PkeyCtx kdf(EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr));
  // HKDF's output is a prefix-stable stream: the first 64 bytes are the
  // same whether 64 or 96 are asked for.
  uint8_t keys[96];
  size_t keys_len = sizeof keys;
  bool ok = kdf && EVP_PKEY_derive_init(kdf.get()) == 1 &&
            EVP_PKEY_CTX_set_hkdf_md(kdf.get(), EVP_sha256()) == 1 &&
            EVP_PKEY_CTX_set1_hkdf_salt(kdf.get(),
                                        reinterpret_cast<const unsigned char*>(transcript.data()),
                                        static_cast<int>(transcript.size())) == 1 &&
            EVP_PKEY_CTX_set1_hkdf_key(kdf.get(), secret, static_cast<int>(secret_len)) == 1 &&
            EVP_PKEY_CTX_add1_hkdf_info(kdf.get(), reinterpret_cast<const unsigned char*>(kInfo),
                                        sizeof kInfo - 1) == 1 &&
            EVP_PKEY_derive(kdf.get(), keys, &keys_len) == 1 && keys_len == sizeof keys;
  std::memset(secret, 0, sizeof secret);
  if (!ok) return false;
  // The first half seals what the client sends, the second what the server sends.
  std::memcpy(client ? out->send.data() : out->recv.data(), keys, 32);
  std::memcpy(client ? out->recv.data() : out->send.data(), keys + 32, 32);
  std::memcpy(out->resume.data(), keys + 64, 32);
  std::memset(keys, 0, sizeof keys);
  return true;
}

bool SealMessage(const PeerKey& key, uint64_t seq, std::string_view aad, const void* body,
                 size_t size, void* out, PeerTag* tag) {
  return Crypt(true, key, seq, aad, body, size, out, tag);
}

bool OpenMessage(const PeerKey& key, uint64_t seq, std::string_view aad, const void* in,
                 size_t size, void* out, const PeerTag& tag) {
  PeerTag t = tag;
  return Crypt(false, key, seq, aad, in, size, out, &t);
}

bool MacMessage(const PeerKey& key, uint64_t seq, std::string_view aad, const void* body,
                size_t size, PeerTag* tag) {
  EVP_CIPHER_CTX* ctx = ThreadCipher();
  if (ctx == nullptr) return false;
  auto iv = Iv(seq);
  int last = 0;
  uint8_t end[16];
  return EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), iv.data()) == 1 &&
         Update(ctx, true, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(), nullptr) &&
         Update(ctx, true, static_cast<const uint8_t*>(body), size, nullptr) &&
         EVP_EncryptFinal_ex(ctx, end, &last) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag->data()) == 1;
}

bool CheckMessageMac(const PeerKey& key, uint64_t seq, std::string_view aad, const void* body,
                     size_t size, const PeerTag& tag) {
  PeerTag want;
  return MacMessage(key, seq, aad, body, size, &want) &&
         CRYPTO_memcmp(want.data(), tag.data(), tag.size()) == 0;
}

bool ReplayWindow::Accept(uint64_t seq) {
  if (seq == 0) return false;
  if (seq > highest_) {
    uint64_t shift = seq - highest_;
    if (shift >= kWindow) {
      seen_.reset();
    } else {
      for (uint64_t s = highest_ + 1; s < seq; ++s) seen_.reset(s % kWindow);
    }
    highest_ = seq;
    seen_.set(seq % kWindow);
    return true;
  }
  if (highest_ - seq >= kWindow) return false;  // too old to tell
  if (seen_.test(seq % kWindow)) return false;
  seen_.set(seq % kWindow);
  return true;
}

}  // namespace tierfs
