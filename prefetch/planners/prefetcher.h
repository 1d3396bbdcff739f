// Prefetcher: the planners and the control plane of promotion.
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
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "prefetch/engine/executor.h"
#include "prefetch/engine/promoter.h"
#include "prefetch/engine/promotion_tuner.h"
#include "prefetch/engine/read_path.h"
#include "prefetch/planners/hint_parser.h"
#include "prefetch/planners/order_plan.h"
#include "prefetch/planners/stage_planner.h"
#include "prefetch/planners/stream_planner.h"
#include "tiering/store/eviction_policy.h"
#include "tiering/store/next_use_table.h"

namespace tierfs {

enum class PrefetchMode { kOnAccess = 0, kStageIn = 1, kOrder = 2 };
const char* PrefetchModeName(PrefetchMode mode);
bool ParsePrefetchMode(std::string_view name, PrefetchMode* out);

struct PrefetchConfig {
  PrefetchMode mode = PrefetchMode::kOnAccess;
  unsigned lookahead = 0;        // files ahead of the reader; 0 = auto-tuned
  bool tune_parallelism = true;  // off when promote_threads is fixed by the user
  size_t max_order_entries = 64u << 20;
  // Bytes the look-ahead may hold ahead of the reader (set from the tiers'
  // size): a window of files larger than the tiers would only thrash.
  uint64_t max_lookahead_bytes = UINT64_MAX;
  std::string mountpoint;  // absolute hint paths below it are accepted
};

class Prefetcher final : public ReadObserver {
 public:
  // With a null promoter (no tiers) hints are parsed and counted but nothing
  // is promoted. All pointers must outlive the prefetcher.
  // `policy` is null unless the eviction policy is the Belady one;
  // `next_uses` (the store's, or null without tiers) is written with every
  // file's declared uses.
  Prefetcher(const PrefetchConfig& config, const Namespace* ns, const ChunkStore* store,
             Promoter* promoter, Executor* executor, BeladyPolicy* policy, NextUseTable* next_uses,
             const ReadCounters* reads, const SourceReader* source);
  ~Prefetcher() override;

  void Start();     // the planner thread; after the daemon forks
  void Shutdown();  // stops it

  void OnRead(NodeId id, uint64_t off, uint64_t len, bool hit) override;

  // Control files. Each returns the bytes accepted or -errno.
  ssize_t WriteOrder(uint64_t writer, uint64_t off, std::string_view data);
  void ClearOrder();
  ssize_t WriteStage(uint64_t writer, uint64_t off, std::string_view data);
  ssize_t WriteMode(std::string_view data);
  std::string ModeText() const;

  // The "prefetch" group's figures: mode, order, stage, autotune.
  void VisitCounters(CounterVisitor& v) const;
  // For tests: called by the planner thread at the start of every round (a
  // sequence point; it may throw, as a planner step could). Set before Start.
  void set_round_hook(std::function<void()> hook) { round_hook_ = std::move(hook); }

 private:
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
  void AppendOrder(uint64_t writer, const HintParser::Result& result);
  // Tells the policy; REQUIRES: mu_ not held.
  void NotifyChanged(std::vector<NodeId>& changed);
  // A read at offset 0: consumes `id`'s declared use; with `chunk` (a file
  // of several chunks), records it as being read, its reader in `chunk`.
  void Consume(NodeId id, bool hit, std::chrono::steady_clock::time_point now,
               std::optional<uint32_t> chunk = std::nullopt);
  // Forgets files whose reader went quiet (into *changed). REQUIRES: mu_.
  void ExpireReading(std::chrono::steady_clock::time_point now, std::vector<NodeId>* changed);

  const PrefetchConfig config_;
  const Namespace* const ns_;
  const ChunkStore* const store_;
  const Catalog* const catalog_;  // store_'s
  Promoter* const promoter_;
  Executor* const executor_;
  BeladyPolicy* const policy_;
  NextUseTable* const next_uses_;
  const ReadCounters* const reads_;
  std::atomic<PrefetchMode> mode_;

  // Lock order: BeladyPolicy's mutex, then mu_, then Promoter::asked_mu_
  // (the look-ahead's ready check calls Promoter::AskedAhead, which takes
  // nothing else). Nothing else is called with mu_ held: not the policy, not
  // the tuner, not the promoter's other methods, not the executor.
  mutable std::mutex mu_;  // guards planner_, the parsers and reading_
  StreamPlanner planner_;
  HintParser order_parser_, stage_parser_;
  uint64_t order_valid_ = 0, order_rejected_ = 0;
  // Files of more than one chunk being read: their occurrence was consumed
  // at offset 0, but the chunks from `chunk` on are still to be read. Without
  // this they would count as never needed again and be the first victims
  // while their reader is still on its way to them (each entry is mirrored
  // in the next-use table: NextUseTable::SetReading). Bounded (kMaxReading);
  // an entry goes when its reader has been quiet for kReadingIdle (a read
  // at the end does not end it: read-ahead may still be fetching earlier
  // pieces).
  struct Reading {
    uint32_t chunk;       // the chunk the reader is in
    uint64_t occurrence;  // the occurrence being read (NextUses::next_id)
    std::chrono::steady_clock::time_point last;
  };
  static constexpr size_t kMaxReading = 4096;
  static constexpr auto kReadingIdle = std::chrono::seconds(1);
  std::unordered_map<NodeId, Reading> reading_;
  std::atomic<size_t> reading_size_{0};  // reads at offset > 0 skip mu_ when 0
  PromotionTuner tuner_;                 // not under mu_: it has its own lock
  StagePlanner stage_;                   // likewise

  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<uint64_t> loop_errors_{0};  // rounds of the planner thread lost to a throw
  std::function<void()> round_hook_;
  std::thread thread_;
};

}  // namespace tierfs
