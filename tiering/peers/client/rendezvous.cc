#include "tiering/peers/client/rendezvous.h"

#include "tiering/base/xxh64.h"

namespace tierfs {
namespace {

// XXH64 of two 64-bit words laid out little-endian.
uint64_t HashPair(uint64_t a, uint64_t b) {
  unsigned char buf[16];
  for (int i = 0; i < 8; ++i) {
    buf[i] = static_cast<unsigned char>(a >> (8 * i));
    buf[8 + i] = static_cast<unsigned char>(b >> (8 * i));
  }
  return Xxh64(buf, sizeof buf);
}

}  // namespace

uint64_t ChunkHash(std::string_view path, uint32_t chunk) {
  return HashPair(Xxh64(path.data(), path.size()), chunk);
}

Rendezvous::Rendezvous(std::vector<std::string> names) : names_(std::move(names)) {
  hashes_.reserve(names_.size());
  for (const std::string& n : names_) hashes_.push_back(Xxh64(n.data(), n.size()));
}

int Rendezvous::Find(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

uint64_t Rendezvous::Weight(uint64_t key, size_t peer) const {
  return HashPair(key, hashes_[peer]);
}

}  // namespace tierfs
