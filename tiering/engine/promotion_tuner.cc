#include "tiering/engine/promotion_tuner.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "tiering/base/log.h"

namespace tierfs {

PromotionTuner::PromotionTuner(Executor* executor, const ChunkStore* store,
                               const ReadCounters* reads, const SourceReader* source,
                               bool tune_parallelism, unsigned lookahead)
    : executor_(executor),
      store_(store),
      reads_(reads),
      reader_(source),
      tune_parallelism_(tune_parallelism && executor != nullptr),
      tune_window_(lookahead == 0),
      window_(lookahead ? lookahead : kStartWindow),
      climber_(1, executor ? executor->threads() : 1,
               std::min(kStartParallel, executor ? executor->threads() : 1)),
      window_tuner_(kMinWindow, kMaxWindow, window_) {
  if (tune_parallelism_) executor_->SetActiveLimit(climber_.value());
}

unsigned PromotionTuner::window() const {
  MutexLock lock(mu_);
  return window_;
}

unsigned PromotionTuner::Tune(double seconds, uint64_t lead, bool order_mode) {
  if (executor_ == nullptr || seconds <= 0) return window();
  // Measured and applied outside mu_: the executor's lock is never taken under it.
  const uint64_t bytes = store_->counters().bytes.load(std::memory_order_relaxed);
  const uint64_t misses = reads_->waits.load(std::memory_order_relaxed) +
                          reads_->source_reads.load(std::memory_order_relaxed);
  const uint64_t timed = reader_ ? reader_->timed_reads() : 0;
  const uint64_t micros = reader_ ? reader_->read_micros() : 0;
  const bool backlog = executor_->queued(Executor::Lane::kForeground) +
                           executor_->queued(Executor::Lane::kLookahead) +
                           executor_->queued(Executor::Lane::kBackground) >
                       0;
  const unsigned limit = executor_->active_limit();
  unsigned new_limit = limit, window;
  {
    MutexLock lock(mu_);
    const double rate = static_cast<double>(bytes - last_bytes_) / seconds;
    const uint64_t new_misses = misses - last_misses_;
    if (timed - last_reads_ >= 8) {  // enough reads to say how fast SOURCE answers
      latency_us_ =
          static_cast<double>(micros - last_us_) / static_cast<double>(timed - last_reads_);
      // The best drifts up slowly, so one lucky second does not rule forever.
      best_latency_us_ =
          best_latency_us_ > 0 ? std::min(best_latency_us_ * 1.02, latency_us_) : latency_us_;
    }
    last_bytes_ = bytes;
    last_misses_ = misses;
    last_reads_ = timed;
    last_us_ = micros;
    if (tune_parallelism_ && backlog) {
      const bool slower = best_latency_us_ > 0 && latency_us_ > 2.5 * best_latency_us_;
      if (slower && limit > 1) {
        new_limit = climber_.BackOff();
        backoffs_++;
        last_decision_ =
            fmt::format("parallel SOURCE reads {} -> {}: SOURCE latency {:.1f} ms, best {:.1f} ms",
                        limit, new_limit, latency_us_ / 1e3, best_latency_us_ / 1e3);
      } else {
        new_limit = climber_.Step(rate);
        if (new_limit != limit) {
          last_decision_ = fmt::format("parallel SOURCE reads {} -> {} at {:.1f} MB/s", limit,
                                       new_limit, rate / 1e6);
        }
      }
      if (new_limit != limit) {
        decisions_++;
        TIERFS_LOG(kInfo, "autotune: {}", last_decision_);
      }
    }
    if (tune_window_ && order_mode) {
      window_seconds_ += seconds;
      window_misses_ += new_misses;
    } else {
      window_seconds_ = 0;
      window_misses_ = 0;
    }
    if (window_seconds_ >= 1.0) {
      window_seconds_ = 0;
      const uint64_t missed = std::exchange(window_misses_, 0);
      unsigned before = window_;
      window_ = window_tuner_.Step(missed, lead);
      if (window_ != before) {
        decisions_++;
        last_decision_ = fmt::format("look-ahead {} -> {} files ({} misses, lead {})", before,
                                     window_, missed, lead);
        TIERFS_LOG(kInfo, "autotune: {}", last_decision_);
      }
    }
    window = window_;
  }
  if (new_limit != limit) executor_->SetActiveLimit(new_limit);
  return window;
}

void PromotionTuner::VisitCounters(CounterVisitor& v) const {
  const unsigned parallelism = executor_ ? executor_->active_limit() : 0;
  MutexLock lock(mu_);
  v.Gauge("parallelism", parallelism,
          {"Promotions allowed to read SOURCE at once.", Unit::kPromotions, "parallel"});
  v.Flag("tune_parallelism", tune_parallelism_,
         {"1 if the number of parallel SOURCE reads is tuned.", Unit::kNone, "parallelism_tuned"});
  v.Flag("tune_lookahead", tune_window_,
         {"1 if the read-ahead window is tuned.", Unit::kNone, "lookahead_tuned"});
  v.Gauge("source_latency_ms", latency_us_ / 1e3,
          {"Mean latency of SOURCE reads in the last tuning period.", Unit::kMilliseconds});
  v.Gauge("best_source_latency_ms", best_latency_us_ / 1e3,
          {"Lowest mean latency of SOURCE reads seen in a tuning period.", Unit::kMilliseconds});
  v.Counter("backoffs", backoffs_,
            {"Times the tuner lowered parallel SOURCE reads because latency climbed."});
  v.Counter("decisions", decisions_, {"Changes the tuner made to a knob."});
  v.Note("last", last_decision_);
}

}  // namespace tierfs
