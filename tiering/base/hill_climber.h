// HillClimber moves one integer knob (parallel SOURCE reads in the promotion
// tuner, metadata requests in flight in the namespace scan) towards the
// highest measured rate. From a cold start it doubles the knob while that
// pays (slow start: 8 -> 16 -> 32 in two periods); after the first step that
// did not pay, in steps that double while they keep paying and fall back to
// one after a step that did not, and down while that costs no more than
// noise (fewest requests for the best rate); backs off when a step made it
// worse, settles there for a while, then probes again.
// Pure: the caller measures and applies. Not thread-safe.
#pragma once

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

}  // namespace tierfs
