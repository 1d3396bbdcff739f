#include "prefetch/planners/prefetcher.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>

#include "tiering/base/log.h"

namespace tierfs {
namespace {

constexpr const char* kModeNames[] = {"on-access", "stage-in", "order"};

}  // namespace

const char* PrefetchModeName(PrefetchMode mode) { return kModeNames[static_cast<int>(mode)]; }

bool ParsePrefetchMode(std::string_view name, PrefetchMode* out) {
  for (int i = 0; i < 3; ++i) {
    if (name == kModeNames[i]) {
      *out = static_cast<PrefetchMode>(i);
      return true;
    }
  }
  return false;
}

Prefetcher::Prefetcher(const PrefetchConfig& config, const Namespace* ns, const ChunkStore* store,
                       Promoter* promoter, Executor* executor, BeladyPolicy* policy,
                       NextUseTable* next_uses, const ReadCounters* reads,
                       const SourceReader* source)
    : config_(config),
      ns_(ns),
      store_(store),
      catalog_(store ? &store->catalog() : nullptr),
      promoter_(promoter),
      executor_(executor),
      policy_(policy),
      next_uses_(next_uses),
      reads_(reads),
      mode_(PrefetchMode::kOnAccess),
      planner_(ns->size(), config.max_order_entries, next_uses),
      order_parser_(ns, config.mountpoint, /*directories=*/false, /*directives=*/true),
      stage_parser_(ns, config.mountpoint, /*directories=*/true),
      tuner_(executor, store, reads, source, config.tune_parallelism, config.lookahead),
      stage_(ns, catalog_) {
  if (policy_) policy_->SetTransientLimit(tuner_.window());
  SetMode(config.mode);
}

Prefetcher::~Prefetcher() { Shutdown(); }

void Prefetcher::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void Prefetcher::Shutdown() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Prefetcher::SetMode(PrefetchMode mode) {
  PrefetchMode old = mode_.exchange(mode);
  // Declared uses count only in order mode.
  if (next_uses_) next_uses_->SetActive(mode == PrefetchMode::kOrder);
  {
    if (mode == PrefetchMode::kStageIn && old != PrefetchMode::kStageIn) stage_.StageAll();
  }
  if (old != mode) TIERFS_LOG(kInfo, "prefetch mode: {}", PrefetchModeName(mode));
  wake_.notify_all();
}

void Prefetcher::OnRead(NodeId id, uint64_t off, uint64_t len, bool hit) {
  if (mode_.load(std::memory_order_relaxed) != PrefetchMode::kOrder) return;
  const auto now = std::chrono::steady_clock::now();
  // Files of one chunk are never in reading_ (nor without tiers).
  if (catalog_ == nullptr || catalog_->chunks(id) < 2) {
    if (off == 0) Consume(id, hit, now);
    return;
  }
  // The chunk holding the read's last byte: the one its reader is in.
  const auto chunk = static_cast<uint32_t>((off + len - 1) / catalog_->chunk_size());
  if (off != 0) {  // a later piece: how far its reader is
    if (reading_size_.load(std::memory_order_relaxed) == 0) return;
    bool moved = false;
    {
      std::lock_guard lock(mu_);
      auto it = reading_.find(id);
      if (it == reading_.end()) return;
      it->second.last = now;
      if (chunk > it->second.chunk) {
        it->second.chunk = chunk;
        moved = true;
        if (next_uses_) next_uses_->SetReading(id, chunk, it->second.occurrence);
      }
    }
    // The chunks it passed are read: their transient copies may go.
    if (moved && policy_) policy_->NextUseChanged(id);
    return;
  }
  Consume(id, hit, now, chunk);
}

void Prefetcher::Consume(NodeId id, bool hit, std::chrono::steady_clock::time_point now,
                         std::optional<uint32_t> chunk) {
  bool consumed;
  std::vector<NodeId> changed;
  {
    std::lock_guard lock(mu_);
    uint64_t occurrence = 0;
    consumed = planner_.Consume(id, hit, now, &occurrence);
    if (consumed && chunk) {
      if (reading_.size() >= kMaxReading && !reading_.count(id)) ExpireReading(now, &changed);
      if (reading_.size() < kMaxReading || reading_.count(id)) {
        reading_[id] = Reading{*chunk, occurrence, now};
        if (next_uses_) next_uses_->SetReading(id, *chunk, occurrence);
      }
      reading_size_.store(reading_.size(), std::memory_order_relaxed);
    }
  }
  if (consumed) {
    changed.push_back(id);
    NotifyChanged(changed);
    wake_.notify_all();
  }
}

void Prefetcher::ExpireReading(std::chrono::steady_clock::time_point now,
                               std::vector<NodeId>* changed) {
  for (auto it = reading_.begin(); it != reading_.end();) {
    if (now - it->second.last >= kReadingIdle) {
      changed->push_back(it->first);
      if (next_uses_) next_uses_->ClearReading(it->first);
      it = reading_.erase(it);
    } else {
      ++it;
    }
  }
  reading_size_.store(reading_.size(), std::memory_order_relaxed);
}

void Prefetcher::NotifyChanged(std::vector<NodeId>& changed) {
  if (!policy_ || changed.empty()) return;
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (NodeId id : changed) policy_->NextUseChanged(id);
}

void Prefetcher::AppendOrder(uint64_t writer, const HintParser::Result& result) {
  StreamPlanner::Appended appended;
  {
    std::lock_guard lock(mu_);
    order_valid_ += result.valid;
    order_rejected_ += result.rejected;
    planner_.Append(writer, result, &appended);
  }
  NotifyChanged(appended.changed);  // not under mu_: lock order
  if (!result.files.empty() || !result.marks.empty()) wake_.notify_all();
}

ssize_t Prefetcher::WriteOrder(uint64_t writer, uint64_t off, std::string_view data) {
  HintParser::Result result;
  {
    std::lock_guard lock(mu_);
    order_parser_.Feed(writer, off, data, &result);
  }
  AppendOrder(writer, result);
  // Some complete line, and none of them valid: tell the writer.
  if (result.valid == 0 && result.rejected > 0) return -EINVAL;
  return static_cast<ssize_t>(data.size());
}

void Prefetcher::ClearOrder() {
  std::vector<NodeId> changed;
  {
    std::lock_guard lock(mu_);
    HintParser::Result dropped;
    order_parser_.FlushTails(std::chrono::steady_clock::duration::zero(), &dropped);
    changed = planner_.Clear();
  }
  // The policy hears of it, so transient chunks kept for those uses go.
  NotifyChanged(changed);
  TIERFS_LOG(kInfo, "declared order cleared");
}

ssize_t Prefetcher::WriteStage(uint64_t writer, uint64_t off, std::string_view data) {
  HintParser::Result result;
  {
    std::lock_guard lock(mu_);
    stage_parser_.Feed(writer, off, data, &result);
  }
  stage_.Add(result);
  wake_.notify_all();
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

bool Prefetcher::Promote(NodeId id, Executor::Lane lane, bool home_share) {
  for (uint32_t c = 0; c < catalog_->chunks(id); ++c) {
    ChunkKey key{id, c};
    if (catalog_->state(key) != Catalog::kOnSource) continue;
    // With peers, stage-in stages this node's home share: each node its own.
    if (home_share && !promoter_->HomedHere(key)) continue;
    if (!promoter_->Request(key, lane) && catalog_->state(key) == Catalog::kOnSource) {
      // A copy of a chunk another node homes takes free room only: with
      // none, its home is asked to promote it, and later chunks are still
      // worth asking for.
      if (!promoter_->HomedHere(key)) {
        if (lane == Executor::Lane::kLookahead) promoter_->AskHomeAhead(key);
        continue;
      }
      return false;  // no room (or not worth it), or the lane is full
    }
  }
  return true;
}

void Prefetcher::PumpLookahead() {
  std::vector<NodeId> next, changed;
  const unsigned window = tuner_.window();  // the tuner's lock is not taken under mu_
  {
    std::lock_guard lock(mu_);
    // Resident here, or its home (another node) was asked to promote it.
    auto ready = [this](NodeId id) {
      for (uint32_t c = 0; c < catalog_->chunks(id); ++c) {
        const ChunkKey key{id, c};
        if (!Catalog::IsResident(catalog_->state(key)) && !promoter_->AskedAhead(key)) {
          return false;
        }
      }
      return true;
    };
    auto size = [this](NodeId id) { return ns_->node(id).size; };
    next = planner_.Lookahead(window, config_.max_lookahead_bytes, ready, size, &changed);
  }
  NotifyChanged(changed);
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
    Promote(id, Executor::Lane::kBackground, mode_.load() == PrefetchMode::kStageIn);
  }
}

void Prefetcher::Loop() {
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
    std::unique_lock lock(mu_);
    wake_.wait_for(lock, std::chrono::milliseconds(50));
    if (stop_) return false;
    // Lines whose writer never sent the newline.
    std::map<uint64_t, HintParser::Result> late;
    order_parser_.FlushTails(std::chrono::milliseconds(500), &late);
    HintParser::Result late_stage;
    stage_parser_.FlushTails(std::chrono::milliseconds(500), &late_stage);
    std::vector<NodeId> quiet;  // files whose reader stopped mid-way
    if (!reading_.empty()) ExpireReading(std::chrono::steady_clock::now(), &quiet);
    lock.unlock();
    NotifyChanged(quiet);
    stage_.Add(late_stage);
    for (auto& [writer, r] : late) AppendOrder(writer, r);
  }
  if (promoter_ == nullptr) return true;
  if (mode_.load() == PrefetchMode::kOrder) PumpLookahead();
  FeedStage();
  auto now = std::chrono::steady_clock::now();
  double dt = std::chrono::duration<double>(now - *last_tune).count();
  if (dt >= PromotionTuner::kPeriod) {
    *last_tune = now;
    uint64_t lead;
    {
      std::lock_guard lock(mu_);
      lead = planner_.min_lead();
    }
    unsigned window = tuner_.Tune(dt, lead, mode_.load() == PrefetchMode::kOrder);
    if (policy_) policy_->SetTransientLimit(window);  // not under mu_: lock order
  }
  return true;
}

void Prefetcher::VisitCounters(CounterVisitor& v) const {
  // Read before taking any lock: the executor's lock is never taken under ours.
  const bool background_idle = !executor_ || executor_->queued(Executor::Lane::kBackground) == 0;
  v.Text("mode", PrefetchModeName(mode_.load()), "prefetch_mode");
  v.Counter("planner_errors", loop_errors_.load(std::memory_order_relaxed),
            {"Rounds of the prefetch planner lost to an error."});
  v.BeginGroup("order");
  {
    std::lock_guard lock(mu_);
    v.Counter("valid_lines", order_valid_, {"Paths written to .tierfs/order and accepted."});
    v.Counter("rejected_lines", order_rejected_, {"Lines written to .tierfs/order and rejected."});
    order_parser_.VisitRejected(v);
    v.Gauge("lookahead", tuner_.window(), {"Files promoted ahead of the readers at most."});
    planner_.VisitCounters(v);
  }
  v.EndGroup();
  v.BeginGroup("stage");
  stage_.VisitCounters(v, background_idle);
  {
    std::lock_guard lock(mu_);
    stage_parser_.VisitRejected(v);
  }
  v.EndGroup();
  v.BeginGroup("autotune");
  tuner_.VisitCounters(v);
  v.EndGroup();
}

}  // namespace tierfs
