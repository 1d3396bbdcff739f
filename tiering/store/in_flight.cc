#include "tiering/store/in_flight.h"

#include <cerrno>

namespace tierfs {

void InFlight::Progress(uint64_t written, const char* data, std::shared_ptr<const void> hold) {
  {
    MutexLock lock(mu_);
    written_ = written;
    if (data_ == nullptr && data != nullptr) {
      data_ = data;
      hold_ = std::move(hold);
    }
  }
  cv_.NotifyAll();
}

void InFlight::Finish() {
  {
    MutexLock lock(mu_);
    done_ = true;
  }
  cv_.NotifyAll();
}

int InFlight::Read(uint64_t off, size_t n, Deadline deadline, TierRead* out) {
  MutexLock lock(mu_);
  bool ready = cv_.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) {
    return done_ || (data_ != nullptr && written_ >= off + n);
  });
  if (!ready) return -ETIMEDOUT;
  if (done_) return -EAGAIN;
  out->data = data_ + off;
  out->size = n;
  out->hold = hold_;
  return 0;
}

std::shared_ptr<InFlight> InFlightTable::TryAdd(ChunkKey key) {
  auto chunk = std::make_shared<InFlight>();
  Stripe& s = StripeOf(key);
  MutexLock lock(s.mu);
  return s.chunks.try_emplace(key, chunk).second ? chunk : nullptr;
}

std::shared_ptr<InFlight> InFlightTable::Find(ChunkKey key) const {
  Stripe& s = StripeOf(key);
  MutexLock lock(s.mu);
  auto it = s.chunks.find(key);
  return it == s.chunks.end() ? nullptr : it->second;
}

void InFlightTable::Remove(ChunkKey key) {
  Stripe& s = StripeOf(key);
  MutexLock lock(s.mu);
  s.chunks.erase(key);
}

}  // namespace tierfs
