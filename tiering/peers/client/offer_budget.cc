#include "tiering/peers/client/offer_budget.h"

namespace tierfs {

bool OfferBudget::TryTake(uint64_t bytes) {
  MutexLock lock(mu_);
  if (offers_ >= max_offers_ || bytes_ + bytes > max_bytes_) return false;
  ++offers_;
  bytes_ += bytes;
  return true;
}

void OfferBudget::Give(uint64_t bytes) {
  MutexLock lock(mu_);
  --offers_;
  bytes_ -= bytes;
}

size_t OfferBudget::offers() const {
  MutexLock lock(mu_);
  return offers_;
}

uint64_t OfferBudget::bytes() const {
  MutexLock lock(mu_);
  return bytes_;
}

}  // namespace tierfs
