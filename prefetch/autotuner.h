// Auto-tuning (PRISMA tuned up-only from buffer occupancy; this goes both
// ways, from measured rates):
// - HillClimber moves one integer knob (parallel SOURCE reads) towards the
//   highest measured rate. From a cold start it doubles the knob while that
//   pays (slow start: 8 -> 16 -> 32 in two periods); after the first step
//   that did not pay, in steps that double while they keep paying and
//   fall back to one after a step that did not, and down while that costs no
//   more than noise (fewest reads for the best rate); backs off when a step
//   made it worse, settles there for a while, then probes again.
// - LookaheadTuner grows the look-ahead window when reads miss (waited for
//   or went to SOURCE) while the prefetcher is not far enough ahead, and
//   shrinks it slowly after long calm.
// Both are pure: the caller measures and applies. Not thread-safe.
#pragma once

#include <cstdint>

namespace tierfs {

class HillClimber {
 public:
  // `tolerance`: relative rate change treated as noise.
  HillClimber(unsigned lo, unsigned hi, unsigned start, double tolerance = 0.05,
              unsigned settle_steps = 5);
  // The rate measured while the knob was at value(); returns the next value.
  unsigned Step(double rate);
  unsigned value() const { return value_; }
  // SOURCE answers slower than it did without reading faster (a shared PFS
  // under load): step down by a quarter now, and probe from there.
  unsigned BackOff();

 private:
  unsigned Clamp(long v) const;
  unsigned Probe();
  const unsigned lo_, hi_;
  const double tolerance_;
  const unsigned settle_steps_;
  unsigned value_;
  int dir_ = +1;
  unsigned step_ = 1;       // the next probe's distance
  bool slow_start_ = true;  // doubling the knob until a step does not pay
  double peak_rate_ = 0;    // the best accepted rate, decaying 0.2% a step
  bool have_base_ = false;
  unsigned base_ = 0;  // the value the last accepted rate was measured at
  double base_rate_ = 0;
  unsigned settling_ = 0;  // steps left to hold at base_ before probing again
  double settle_sum_ = 0;  // rates measured while holding (their mean is base_rate_)
  unsigned settle_n_ = 0;
};

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
