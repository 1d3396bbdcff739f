// Prefetcher: the planner loop of promotion, and the control files' front.
// Its parts, one job each: HintIntake parses what is written to the control
// files; OrderModel keeps the declared orders and readers' positions (the
// next-use model, written to the store's NextUseTable); StagePlanner queues
// stage-in; PromotionTuner tunes. The Prefetcher owns the mode and the
// planner thread, and remembers which chunks' homes it asked ahead.
//
// Modes (-o prefetch=..., or written to .tierfs/prefetch at runtime):
// - on-access: a chunk is promoted when first read (ReadPath does it).
// - stage-in: the whole dataset is queued for promotion at mount, in
//   namespace order, on the background lane, while reads go on (Serizawa &
//   Tatebe); foreground misses and look-ahead always run first.
// - order: files declared in .tierfs/order are promoted a window ahead of the
//   reader (look-ahead lane), the reader's position is tracked from its reads,
//   and full tiers evict the chunk needed farthest in the future (Belady:
//   the planner keeps the store's NextUseTable up to date, BeladyPolicy
//   reads it).
// A planner thread pumps look-ahead and stage-in, completes stale hint lines
// and runs the autotuner once a second.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "prefetch/planners/hint_intake.h"
#include "prefetch/planners/hint_parser.h"
#include "prefetch/planners/order_model.h"
#include "prefetch/planners/prefetch_config.h"
#include "prefetch/planners/stage_planner.h"
#include "prefetch/planners/stream_planner.h"
#include "tiering/base/executor.h"
#include "tiering/base/mutex.h"
#include "tiering/engine/promoter.h"
#include "tiering/engine/promotion_tuner.h"
#include "tiering/engine/read_path.h"
#include "tiering/store/eviction_policy.h"
#include "tiering/store/next_use_table.h"

namespace tierfs {

// What a prefetcher works with, each outliving it. Without tiers only `ns`
// is set: hints are parsed and counted but nothing is promoted.
struct PrefetcherParts {
  const Namespace* ns = nullptr;  // always
  const ChunkStore* store = nullptr;
  Promoter* promoter = nullptr;
  Executor* executor = nullptr;
  BeladyPolicy* policy = nullptr;       // null unless the eviction policy is the Belady one
  NextUseTable* next_uses = nullptr;    // the store's: written with every file's declared uses
  const ReadCounters* reads = nullptr;  // the read path's, for the tuner
  const SourceReader* source = nullptr;
};

class Prefetcher final : public ReadObserver {
 public:
  Prefetcher(const PrefetchConfig& config, const PrefetcherParts& parts);
  ~Prefetcher() override;

  void Start();     // the planner thread; after the daemon forks
  void Shutdown();  // stops it

  void OnRead(NodeId id, uint64_t off, uint64_t len, bool hit) override;

  // What the writers of the order and stage files may name (null, the
  // default: everything). REQUIRES: set before the first write; `access`
  // outlives the prefetcher (or is reset to null first).
  void set_hint_access(HintAccess* access) { intake_.set_access(access); }

  // Control files. Each returns the bytes accepted or -errno.
  ssize_t WriteOrder(const HintWriter& writer, uint64_t off, std::string_view data);
  void ClearOrder();
  ssize_t WriteStage(const HintWriter& writer, uint64_t off, std::string_view data);
  ssize_t WriteMode(std::string_view data);
  std::string ModeText() const;
  // Why a declared order is not followed now, and how to have it followed
  // (logged at the first paths written; "warning" in the order's figures
  // once paths were accepted); "" in order mode.
  std::string UnusedOrderWarning() const;

  // The "prefetch" group's figures: mode, order, stage, autotune.
  void VisitCounters(CounterVisitor& v) const;
  // For tests: called by the planner thread at the start of every round (a
  // sequence point; it may throw, as a planner step could). Set before Start.
  void set_round_hook(std::function<void()> hook) { round_hook_ = std::move(hook); }

 private:
  // Chunks whose home (another node) was asked to promote them ahead: look-
  // ahead counts them as ready. The last kMax asked; the planner thread's
  // alone (no lock).
  class AskedAhead {
   public:
    static constexpr size_t kMax = 1 << 16;
    bool Contains(ChunkKey key) const { return set_.count(key) != 0; }
    bool Remember(ChunkKey key);  // false if already remembered
    void Forget(ChunkKey key) { set_.erase(key); }

   private:
    std::unordered_set<ChunkKey, ChunkKeyHash> set_;
    std::deque<ChunkKey> order_;  // oldest first
  };

  void SetMode(PrefetchMode mode);
  void Loop();
  // One round of the planner thread: wait, flush late lines, look ahead,
  // stage, tune. False once stopped. May throw (Loop catches).
  bool Round(std::chrono::steady_clock::time_point* last_tune);
  void PumpLookahead();
  void FeedStage();
  // false: stopped (no room, lane full). `home_share`: only the chunks this
  // node homes (stage-in with peers).
  bool Promote(NodeId id, Executor::Lane lane, bool home_share = false);
  void Declare(uint64_t writer, const HintParser::Result& result);

  const PrefetchConfig config_;
  const Namespace* const ns_;
  const Catalog* const catalog_;  // the store's; null without tiers
  Promoter* const promoter_;
  Executor* const executor_;
  BeladyPolicy* const policy_;
  std::atomic<PrefetchMode> mode_;

  HintIntake intake_;     // has its own lock
  OrderModel model_;      // likewise
  PromotionTuner tuner_;  // likewise
  StagePlanner stage_;    // likewise
  AskedAhead asked_;      // the planner thread's
  Mutex mu_;              // guards stop_; a leaf lock (the wake-up's)
  CondVar wake_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> loop_errors_{0};          // rounds of the planner thread lost to a throw
  std::atomic<bool> warned_unused_order_{false};  // logged once: an order outside order mode
  std::function<void()> round_hook_;
  std::thread thread_;
};

}  // namespace tierfs
