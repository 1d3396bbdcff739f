#include "tiering/engine/chunk_source.h"

#include <cerrno>
#include <functional>
#include <new>
#include <utility>

namespace tierfs {

ssize_t ChunkSource::Read(ChunkKey key, uint64_t off, size_t n, char* buf, HomeLink* home) {
  if (!home->is_source()) {
    bool from_source = false;
    ssize_t r =
        peers_->Fetch(home->link(), key, off, n, buf, false, Hedge(key, off, n), &from_source);
    // SOURCE won the race: the rest of the chunk comes from SOURCE too.
    if (from_source) *home = HomeLink::Source();
    if (from_source || r == static_cast<ssize_t>(n)) return r;
    *home = HomeLink::Source();  // it failed us (the peers count the fallback)
  }
  return reader_->Read(key.node, static_cast<uint64_t>(key.chunk) * chunk_size_ + off, n, buf);
}

std::function<ssize_t(char*)> ChunkSource::Hedge(ChunkKey key, uint64_t off, size_t n) {
  return [this, key, off, n](char* dest) {
    return reader_->Read(key.node, static_cast<uint64_t>(key.chunk) * chunk_size_ + off, n, dest);
  };
}

ssize_t ChunkSource::ReadForCopy(ChunkKey key, uint64_t off, size_t n, char* buf, Route* route) {
  if (!route->home.is_source() && off == 0 && route->length <= kMaxOffer) {
    bool from_source = false;
    ssize_t r = peers_->Fetch(route->home.link(), key, off, n, buf, /*if_resident=*/true,
                              Hedge(key, off, n), &from_source);
    if (from_source) {  // a stalled home: the chunk is read here, not offered
      route->home = HomeLink::Source();
      return r;
    }
    if (r == static_cast<ssize_t>(n)) return r;
    if (r == -ENODATA) route->offer_to = route->home;  // it has none: read here, then offer
    route->home = HomeLink::Source();
  }
  return Read(key, off, n, buf, &route->home);
}

void ChunkSource::Offer(ChunkKey key, const char* data, size_t n, HomeLink to) {
  if (peers_ != nullptr && !to.is_source() && n <= kMaxOffer)
    peers_->Offer(to.link(), key, data, n);
}

ChunkSource::OfferBuffer& ChunkSource::OfferBuffer::operator=(OfferBuffer&& o) noexcept {
  if (this != &o) {
    Release();
    held_ = std::exchange(o.held_, nullptr);
    size_ = std::exchange(o.size_, 0);
    bytes_ = std::move(o.bytes_);
  }
  return *this;
}

void ChunkSource::OfferBuffer::Release() {
  if (held_ != nullptr) held_->fetch_sub(size_, std::memory_order_relaxed);
  held_ = nullptr;
  size_ = 0;
  bytes_.reset();
}

ChunkSource::OfferBuffer ChunkSource::TakeOfferBuffer(uint64_t n) {
  OfferBuffer b;
  if (peers_ == nullptr || n > kMaxOffer) return b;
  if (offer_held_.fetch_add(n, std::memory_order_relaxed) + n > kMaxOfferHeld) {
    offer_held_.fetch_sub(n, std::memory_order_relaxed);
    return b;
  }
  b.held_ = &offer_held_;
  b.size_ = n;
  b.bytes_.reset(new (std::nothrow) char[n]);
  if (b.bytes_ == nullptr) b.Release();
  return b;
}

bool ChunkSource::AskHome(ChunkKey key) {
  const HomeLink home = Home(key);
  return home.is_source() || peers_->AskAhead(home.link(), key);
}

}  // namespace tierfs
