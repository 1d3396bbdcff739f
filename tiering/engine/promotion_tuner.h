// PromotionTuner: once a period (kPeriod), measures the promotion stack and
// moves its two knobs (PRISMA tuned up only, from buffer occupancy; this
// goes both ways, from measured rates):
// - parallel SOURCE reads, the executor's active limit: a HillClimber on
//   the bytes promoted per second, while promotions are queued, every
//   period; it doubles the knob from a cold start while that pays, so a
//   cold epoch of two seconds runs most of its promotions at the PFS's knee.
//   When SOURCE's mean read latency climbs past 2.5x the best seen without
//   the rate rising, it backs off by a quarter: a shared PFS under load is
//   not hammered for nothing.
// - the look-ahead window (files ahead of the readers), a LookaheadTuner on
//   the reads that missed and the readers' smallest lead, once a second.
// Thread-safe.
#pragma once

#include <string>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/executor.h"
#include "tiering/base/mutex.h"
#include "tiering/engine/lookahead_tuner.h"
#include "tiering/engine/read_path.h"
#include "tiering/source/source_reader.h"
#include "tiering/store/chunk_store.h"

namespace tierfs {

class PromotionTuner {
 public:
  static constexpr unsigned kStartParallel = 8;
  static constexpr unsigned kMinWindow = 8, kMaxWindow = 8192, kStartWindow = 64;
  static constexpr double kPeriod = 0.25;  // seconds between Tune calls

  // All pointers outlive the tuner. `tune_parallelism` false: the executor
  // runs all its threads. `lookahead` 0: the window is tuned.
  PromotionTuner(Executor* executor, const ChunkStore* store, const ReadCounters* reads,
                 const SourceReader* source, bool tune_parallelism, unsigned lookahead);

  // One period of `seconds`; `lead`: the readers' smallest lead; the window
  // is tuned only in order mode. Returns the window.
  unsigned Tune(double seconds, uint64_t lead, bool order_mode);
  unsigned window() const;
  // The "autotune" group's figures.
  void VisitCounters(CounterVisitor& v) const;

 private:
  Executor* const executor_;
  const ChunkStore* const store_;
  const ReadCounters* const reads_;
  const SourceReader* const reader_;
  const bool tune_parallelism_;
  const bool tune_window_;
  mutable Mutex mu_;  // guards the rest. Lock order: a leaf (the executor is set outside it).
  unsigned window_ GUARDED_BY(mu_);
  HillClimber climber_ GUARDED_BY(mu_);
  LookaheadTuner window_tuner_ GUARDED_BY(mu_);
  uint64_t decisions_ GUARDED_BY(mu_) = 0;
  uint64_t backoffs_ GUARDED_BY(mu_) = 0;
  std::string last_decision_ GUARDED_BY(mu_);
  uint64_t last_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t last_misses_ GUARDED_BY(mu_) = 0;
  uint64_t last_reads_ GUARDED_BY(mu_) = 0;
  uint64_t last_us_ GUARDED_BY(mu_) = 0;
  double window_seconds_ GUARDED_BY(mu_) = 0;  // since the window's last step
  uint64_t window_misses_ GUARDED_BY(mu_) = 0;
  double best_latency_us_ GUARDED_BY(mu_) = 0;
  double latency_us_ GUARDED_BY(mu_) = 0;
};

}  // namespace tierfs
