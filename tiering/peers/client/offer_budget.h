// OfferBudget: the offers a PeerClient is sending at once, bounded in
// number and in bytes (max_offers, max_offer_bytes): an offer beyond
// either bound is dropped by its caller, never queued. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tiering/base/mutex.h"

namespace tierfs {

class OfferBudget {
 public:
  OfferBudget(size_t max_offers, uint64_t max_bytes)
      : max_offers_(max_offers), max_bytes_(max_bytes) {}

  // One offer of `bytes` taken from the budget; false (nothing taken) if
  // it would exceed either bound.
  bool TryTake(uint64_t bytes);
  // An offer taken is sent or dropped: its share back.
  void Give(uint64_t bytes);

  size_t offers() const;
  uint64_t bytes() const;

 private:
  const size_t max_offers_;
  const uint64_t max_bytes_;
  mutable Mutex mu_;  // guards the two below. A leaf lock.
  size_t offers_ GUARDED_BY(mu_) = 0;
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
};

}  // namespace tierfs
