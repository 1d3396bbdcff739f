#include "prefetch/planners/prefetcher.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>

#include "tiering/base/log_limiter.h"
#include "tiering/store/reclaimer.h"

namespace tierfs {

Prefetcher::Prefetcher(const PrefetchConfig& config, const PrefetcherParts& parts)
    : config_(config),
      ns_(parts.ns),
      catalog_(parts.store ? &parts.store->catalog() : nullptr),
      promoter_(parts.promoter),
      executor_(parts.executor),
      policy_(parts.policy),
      mode_(PrefetchMode::kOnAccess),
      intake_(parts.ns, config.mountpoint, /*show_rejected_lines=*/!config.shared_control),
      model_(parts.ns->size(), config.max_order_entries, catalog_, parts.next_uses, parts.policy),
      tuner_(parts.executor, parts.store, parts.reads, parts.source, config.tune_parallelism,
             config.lookahead),
      stage_(parts.ns, catalog_, config.stage_share_bytes) {
  model_.set_show_stream_names(!config.shared_control);
  stage_.set_store(parts.store);
  if (policy_) policy_->SetTransientLimit(tuner_.window());
  SetMode(config.mode);
}

Prefetcher::~Prefetcher() { Shutdown(); }

void Prefetcher::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void Prefetcher::Shutdown() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void Prefetcher::SetMode(PrefetchMode mode) {
  PrefetchMode old = mode_.exchange(mode);
  model_.SetActive(mode == PrefetchMode::kOrder);  // declared uses count only in order mode
  if (mode == PrefetchMode::kStageIn && old != PrefetchMode::kStageIn) stage_.StageAll();
  // A control-file writer may switch as often as it likes: sampled.
  if (old != mode) TIERFS_LOG_SAMPLED(kInfo, "prefetch mode: {}", PrefetchModeName(mode));
  wake_.NotifyAll();
}

void Prefetcher::OnRead(NodeId id, uint64_t off, uint64_t len, bool hit) {
  if (mode_.load(std::memory_order_relaxed) != PrefetchMode::kOrder) return;
  if (model_.OnRead(id, off, len, hit, std::chrono::steady_clock::now())) wake_.NotifyAll();
}

void Prefetcher::Declare(uint64_t writer, const HintParser::Result& result) {
  if (model_.Declare(writer, result)) wake_.NotifyAll();
}

std::string Prefetcher::UnusedOrderWarning() const {
  const PrefetchMode mode = mode_.load();
  if (mode == PrefetchMode::kOrder) return "";
  return fmt::format(
      "the prefetch mode is {}: the declared order is kept but not followed; to follow it: echo "
      "order > {}/.tierfs/prefetch",
      PrefetchModeName(mode), config_.mountpoint.empty() ? "MOUNT" : config_.mountpoint);
}

ssize_t Prefetcher::WriteOrder(const HintWriter& writer, uint64_t off, std::string_view data) {
  HintParser::Result result = intake_.FeedOrder(writer, off, data);
  Declare(writer.id, result);
  if (result.valid > result.directives && !warned_unused_order_.exchange(true)) {
    if (std::string why = UnusedOrderWarning(); !why.empty()) {
      TIERFS_LOG(kWarning, "order hints written: {}", why);
    } else {
      warned_unused_order_ = false;  // in order mode: warn if it changes
    }
  }
  // Some complete line, and none of them valid: tell the writer.
  if (result.valid == 0 && result.rejected > 0) return -EINVAL;
  return static_cast<ssize_t>(data.size());
}

void Prefetcher::ClearOrder() {
  intake_.DropOrderTails();
  model_.Clear();
  TIERFS_LOG_SAMPLED(kInfo, "declared order cleared");
}

ssize_t Prefetcher::WriteStage(const HintWriter& writer, uint64_t off, std::string_view data) {
  HintParser::Result result = intake_.FeedStage(writer, off, data);
  stage_.Add(result);
  wake_.NotifyAll();
  if (result.valid == 0 && result.rejected > 0) return -EINVAL;
  return static_cast<ssize_t>(data.size());
}

ssize_t Prefetcher::WriteMode(std::string_view data) {
  while (!data.empty() && (data.back() == '\n' || data.back() == '\r' || data.back() == ' ')) {
    data.remove_suffix(1);
  }
  PrefetchMode mode;
  if (!ParsePrefetchMode(data, &mode)) return -EINVAL;
  if (mode != PrefetchMode::kOnAccess && promoter_ == nullptr) return -EOPNOTSUPP;  // no tiers
  SetMode(mode);
  return static_cast<ssize_t>(data.size());
}

std::string Prefetcher::ModeText() const {
  return std::string(PrefetchModeName(mode_.load())) + "\n";
}

bool Prefetcher::AskedAhead::Remember(ChunkKey key) {
  if (!set_.insert(key).second) return false;
  order_.push_back(key);
  if (order_.size() > kMax) {
    set_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

bool Prefetcher::Promote(NodeId id, Executor::Lane lane, bool home_share) {
  for (uint32_t c = 0; c < catalog_->chunks(id); ++c) {
    ChunkKey key{id, c};
    if (catalog_->state(key) != Catalog::kOnSource) continue;
    // With peers, stage-in stages this node's home share: each node its own.
    if (home_share && !promoter_->HomedHere(key)) continue;
    if (const Promoter::Outcome o = promoter_->Request(key, lane);
        o == Promoter::Outcome::kNoRoom || o == Promoter::Outcome::kLaneFull) {
      // A copy of a chunk another node homes takes free room only: with
      // none, its home is asked to promote it (once among the last asked),
      // and later chunks are still worth asking for.
      if (!promoter_->HomedHere(key)) {
        if (lane == Executor::Lane::kLookahead && asked_.Remember(key) &&
            !promoter_->AskHome(key)) {
          asked_.Forget(key);  // the lane is full: ask again next time
        }
        continue;
      }
      return false;  // no room (or not worth it), or the lane is full
    }
  }
  return true;
}

void Prefetcher::PumpLookahead() {
  // Resident here, or its home (another node) was asked to promote it. Runs
  // under the model's lock: it reads the catalog's atomics and the planner
  // thread's own memory, no lock.
  auto ready = [this](NodeId id) {
    for (uint32_t c = 0; c < catalog_->chunks(id); ++c) {
      const ChunkKey key{id, c};
      if (!Catalog::IsResident(catalog_->state(key)) && !asked_.Contains(key)) return false;
    }
    return true;
  };
  auto size = [this](NodeId id) { return ns_->node(id).size; };
  const std::vector<NodeId> next =
      model_.Lookahead(tuner_.window(), config_.max_lookahead_bytes, ready, size);
  for (NodeId id : next) {
    if (!Promote(id, Executor::Lane::kLookahead)) break;  // later ones are needed even later
  }
}

void Prefetcher::FeedStage() {
  // Keep the background lane half full: enough to keep every thread busy,
  // little enough that look-ahead and misses never queue behind it.
  const size_t target = std::max<size_t>(executor_->capacity() / 2, 1);
  while (executor_->queued(Executor::Lane::kBackground) < target) {
    NodeId id;
    if (!stage_.Next(&id)) return;
    // No room: skipped; smaller files may still fit. With peers, stage-in
    // stages this node's home share (the job's nodes stage the rest); a
    // file named in .tierfs/stage is staged whole (copies from the homes).
    if (!Promote(id, Executor::Lane::kBackground, mode_.load() == PrefetchMode::kStageIn)) {
      stage_.NoRoom(id);
    }
  }
}

void Prefetcher::Loop() {
  // Look-ahead's claims may evict here when the reclaimer is behind: this
  // thread serves no reader.
  const BackgroundClaims background;
  auto last_tune = std::chrono::steady_clock::now();
  // A throw (bad_alloc, a broken invariant in a planner) loses that round,
  // not the thread: a dead planner would leave the mount without prefetch
  // and an uncaught throw would terminate the daemon under a live mount.
  while (true) {
    try {
      if (!Round(&last_tune)) return;
    } catch (...) {
      const uint64_t n = loop_errors_.fetch_add(1, std::memory_order_relaxed) + 1;
      if (n <= 8 || (n & (n - 1)) == 0) {
        TIERFS_LOG(kError, "prefetch planner: {} (#{}); it goes on", DescribeCurrentException(), n);
      }
    }
  }
}

bool Prefetcher::Round(std::chrono::steady_clock::time_point* last_tune) {
  if (round_hook_) round_hook_();
  {
    MutexLock lock(mu_);
    wake_.WaitFor(mu_, std::chrono::milliseconds(50));
    if (stop_) return false;
  }
  // Lines whose writer never sent the newline.
  std::map<uint64_t, HintParser::Result> late;
  std::map<uint64_t, HintParser::Result> late_stage;  // each writer's apart: its share
  intake_.FlushLate(std::chrono::milliseconds(500), &late, &late_stage);
  model_.ExpireQuiet(std::chrono::steady_clock::now());  // readers that stopped mid-way
  for (auto& [writer, r] : late_stage) stage_.Add(r);
  for (auto& [writer, r] : late) Declare(writer, r);
  if (promoter_ == nullptr) return true;
  if (mode_.load() == PrefetchMode::kOrder) PumpLookahead();
  FeedStage();
  stage_.Settle();
  auto now = std::chrono::steady_clock::now();
  double dt = std::chrono::duration<double>(now - *last_tune).count();
  if (dt >= PromotionTuner::kPeriod) {
    *last_tune = now;
    unsigned window = tuner_.Tune(dt, model_.min_lead(), mode_.load() == PrefetchMode::kOrder);
    if (policy_) policy_->SetTransientLimit(window);
  }
  return true;
}

void Prefetcher::VisitCounters(CounterVisitor& v) const {
  // Each part takes its own lock, one at a time.
  const bool background_idle = !executor_ || executor_->queued(Executor::Lane::kBackground) == 0;
  v.Text("mode", PrefetchModeName(mode_.load()), "prefetch_mode");
  v.Counter("planner_errors", loop_errors_.load(std::memory_order_relaxed),
            {"Rounds of the prefetch planner lost to an error."});
  v.BeginGroup("order");
  if (std::string why = UnusedOrderWarning(); !why.empty() && intake_.order_paths() > 0) {
    v.Note("warning", why);
  }
  intake_.VisitOrderCounters(v);
  v.Gauge("lookahead", tuner_.window(),
          {"Files promoted ahead of the readers at most.", Unit::kFiles});
  model_.VisitCounters(v);
  v.EndGroup();
  v.BeginGroup("stage");
  stage_.VisitCounters(v, background_idle);
  intake_.VisitStageCounters(v);
  v.EndGroup();
  v.BeginGroup("autotune");
  tuner_.VisitCounters(v);
  v.EndGroup();
}

}  // namespace tierfs
