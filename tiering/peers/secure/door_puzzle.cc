#include "tiering/peers/secure/door_puzzle.h"

#include <openssl/evp.h>

#include <memory>
#include <string_view>

namespace tierfs {
namespace {

constexpr std::string_view kLabel = "tierfs door puzzle";

// SHA-256 of label, nonce and the solution (little-endian), reusing `ctx`.
bool Digest(EVP_MD_CTX* ctx, const PeerNonce& nonce, uint64_t solution, uint8_t out[32]) {
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(solution >> (8 * i));
  unsigned n = 0;
  return EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
         EVP_DigestUpdate(ctx, kLabel.data(), kLabel.size()) == 1 &&
         EVP_DigestUpdate(ctx, nonce.data(), nonce.size()) == 1 &&
         EVP_DigestUpdate(ctx, le, sizeof le) == 1 && EVP_DigestFinal_ex(ctx, out, &n) == 1 &&
         n == 32;
}

bool LeadingZeros(const uint8_t d[32], unsigned bits) {
  for (unsigned i = 0; i < bits; ++i) {
    if (d[i / 8] & (0x80 >> (i % 8))) return false;
  }
  return true;
}

using Ctx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

}  // namespace

bool PuzzleSolved(const PeerNonce& nonce, uint64_t solution, unsigned bits) {
  if (bits == 0) return true;
  if (bits > kMaxPuzzleBits) return false;
  Ctx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  uint8_t d[32];
  return ctx != nullptr && Digest(ctx.get(), nonce, solution, d) && LeadingZeros(d, bits);
}

bool SolvePuzzle(const PeerNonce& nonce, unsigned bits,
                 std::chrono::steady_clock::time_point deadline, uint64_t* solution) {
  if (bits == 0) {
    *solution = 0;
    return true;
  }
  if (bits > kMaxPuzzleBits) return false;
  Ctx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (ctx == nullptr) return false;
  uint8_t d[32];
  for (uint64_t x = 0;; ++x) {
    if (!Digest(ctx.get(), nonce, x, d)) return false;
    if (LeadingZeros(d, bits)) {
      *solution = x;
      return true;
    }
    if ((x & 4095) == 4095 && std::chrono::steady_clock::now() >= deadline) return false;
  }
}

}  // namespace tierfs
