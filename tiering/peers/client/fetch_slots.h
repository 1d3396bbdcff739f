// FetchSlots: a peer's requests outstanding at once, at most max_in_flight;
// a Fetch beyond waits for a slot until its deadline. The same wait-point
// wakes the Fetches waiting for the peer's connection to come up
// (WaitUntil, NotifyAll), so a slot freed and a state changed reach every
// caller of the peer. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>

#include "tiering/base/mutex.h"

namespace tierfs {

class FetchSlots {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  explicit FetchSlots(size_t max) : max_(max) {}

  // A slot, waiting for one up to `deadline`; false if none came free.
  bool Take(Deadline deadline);
  // A slot taken is free again: one waiter wakes.
  void Give();
  // Waits up to `until` for `ready` (which reads only atomics: it is
  // called under the slots' lock), woken by NotifyAll.
  void WaitUntil(Deadline until, const std::function<bool()>& ready);
  // What a waiter waits on changed: every waiter wakes and looks again. A
  // waiter that had not begun to wait when the change was made sees it.
  void NotifyAll();

  size_t in_flight() const;

 private:
  const size_t max_;
  mutable Mutex mu_;  // guards in_flight_. A leaf lock.
  // Signalled when in_flight_ drops and by NotifyAll.
  CondVar cv_;
  size_t in_flight_ GUARDED_BY(mu_) = 0;
};

}  // namespace tierfs
