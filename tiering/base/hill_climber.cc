#include "tiering/base/hill_climber.h"

#include <algorithm>

namespace tierfs {

HillClimber::HillClimber(unsigned lo, unsigned hi, unsigned start, double tolerance,
                         unsigned settle_steps)
    : lo_(lo),
      hi_(std::max(lo, hi)),
      tolerance_(tolerance),
      settle_steps_(settle_steps),
      value_(std::clamp(start, lo, std::max(lo, hi))) {}

unsigned HillClimber::Clamp(long v) const {
  return static_cast<unsigned>(std::clamp<long>(v, lo_, hi_));
}

unsigned HillClimber::Probe() {
  const long step = static_cast<long>(step_) * dir_;
  unsigned next = Clamp(static_cast<long>(base_) + step);
  if (next == base_) {  // at a bound: turn around
    dir_ = -dir_;
    step_ = 1;
    next = Clamp(static_cast<long>(base_) + dir_);
  }
  return next;
}

unsigned HillClimber::Step(double rate) {
  if (settling_ > 0) {  // holding at base_: average its rate afresh, then probe
    settle_sum_ += rate;
    base_rate_ = settle_sum_ / ++settle_n_;
    if (--settling_ > 0) return value_;
    return value_ = Probe();
  }
  if (!have_base_) {
    have_base_ = true;
    base_ = value_;
    base_rate_ = rate;
    if (slow_start_) step_ = std::max(1u, value_);  // the first probe doubles
    return value_ = Probe();
  }
  // value_ is one step away from base_. Keep going if the step helped, or if
  // it went down and cost no more than noise: fewer parallel reads are
  // kinder to the shared PFS (on a plateau the knob walks down to its knee).
  const bool down = value_ < base_;
  // A step down is judged against the best rate kept lately, not only the
  // last one: else steps each within noise add up to a slide down a slope.
  peak_rate_ = std::max(peak_rate_ * 0.998, base_rate_);
  const bool better = rate > base_rate_ * (1 + tolerance_);
  if (better || (down && rate >= peak_rate_ * (1 - tolerance_))) {
    base_ = value_;
    base_rate_ = rate;
    // A step that paid earns a longer stride; one down that only cost
    // nothing walks on one at a time (a plateau's knee is not skipped).
    if (!better) {
      step_ = 1;
    } else if (slow_start_ && !down) {
      step_ = std::max(1u, base_);  // doubles the knob again
    } else {
      step_ = std::min(step_ * 2, hi_ - lo_ + 1);
    }
    return value_ = Probe();
  }
  slow_start_ = false;
  step_ = 1;
  // Worse, or up and within noise: go back, turn around, settle before
  // probing again.
  value_ = base_;
  dir_ = -dir_;
  settling_ = settle_steps_;
  settle_sum_ = 0;
  settle_n_ = 0;
  return value_;
}

unsigned HillClimber::BackOff() {
  value_ = Clamp(static_cast<long>(value_) - std::max<long>(1, value_ / 4));
  base_ = value_;
  have_base_ = false;  // measure afresh here
  peak_rate_ = 0;
  settling_ = 0;
  dir_ = -1;
  step_ = 1;
  slow_start_ = false;
  return value_;
}

}  // namespace tierfs
