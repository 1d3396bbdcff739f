// Auto-tuning (PRISMA tuned up-only from buffer occupancy; this goes both
// ways, from measured rates):
// - HillClimber (tiering/base/hill_climber.h) moves one integer knob (parallel
//   SOURCE reads) towards the highest measured rate.
// - LookaheadTuner grows the look-ahead window when reads miss (waited for
//   or went to SOURCE) while the prefetcher is not far enough ahead, and
//   shrinks it slowly after long calm.
// LookaheadTuner is pure: the caller measures and applies. Not thread-safe.
#pragma once

#include <cstdint>

#include "tiering/base/hill_climber.h"

namespace tierfs {

class LookaheadTuner {
 public:
  LookaheadTuner(unsigned lo, unsigned hi, unsigned start) : lo_(lo), hi_(hi), value_(start) {}
  // One period: reads that missed, and how many declared files ahead of the
  // reader are resident. Returns the next window.
  unsigned Step(uint64_t misses, uint64_t lead);
  unsigned value() const { return value_; }

 private:
  const unsigned lo_, hi_;
  unsigned value_;
  unsigned calm_ = 0;
};

}  // namespace tierfs
