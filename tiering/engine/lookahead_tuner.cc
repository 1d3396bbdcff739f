#include "tiering/engine/lookahead_tuner.h"

#include <algorithm>

namespace tierfs {

unsigned LookaheadTuner::Step(uint64_t misses, uint64_t lead) {
  if (misses > 0 && lead < value_) {
    value_ = std::min(hi_, std::max(value_ + 1, value_ * 2));
    calm_ = 0;
  } else if (misses == 0 && ++calm_ >= 30) {
    value_ = std::max(lo_, value_ - value_ / 4);
    calm_ = 0;
  }
  return value_;
}

}  // namespace tierfs
