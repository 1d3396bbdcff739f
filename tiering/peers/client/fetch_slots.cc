#include "tiering/peers/client/fetch_slots.h"

namespace tierfs {

bool FetchSlots::Take(Deadline deadline) {
  MutexLock lock(mu_);
  if (!cv_.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) { return in_flight_ < max_; })) {
    return false;
  }
  ++in_flight_;
  return true;
}

void FetchSlots::Give() {
  {
    MutexLock lock(mu_);
    --in_flight_;
  }
  cv_.NotifyOne();
}

void FetchSlots::WaitUntil(Deadline until, const std::function<bool()>& ready) {
  MutexLock lock(mu_);
  cv_.WaitUntil(mu_, until, ready);
}

void FetchSlots::NotifyAll() {
  { MutexLock lock(mu_); }  // a waiter is either waiting or sees the change
  cv_.NotifyAll();
}

size_t FetchSlots::in_flight() const {
  MutexLock lock(mu_);
  return in_flight_;
}

}  // namespace tierfs
