#include "prefetch/planners/stage_planner.h"

#include <algorithm>
#include <cmath>

namespace tierfs {

StagePlanner::StagePlanner(const Namespace* ns, const Catalog* catalog, uint64_t user_share)
    : ns_(ns),
      catalog_(catalog),
      user_share_(user_share),
      marks_(catalog ? std::make_unique<std::atomic<uint8_t>[]>(ns->size()) : nullptr) {}

bool StagePlanner::Resident(NodeId id) const {
  for (uint32_t c = 0; c < catalog_->chunks(id); ++c) {
    if (!Catalog::IsResident(catalog_->state(ChunkKey{id, c}))) return false;
  }
  return true;
}

void StagePlanner::AddFile(NodeId id, uid_t uid) {
  if (!catalog_ || catalog_->chunks(id) == 0) return;
  const uint8_t m = marks_[id].load(std::memory_order_relaxed);
  if (m & kNamedNow) return;  // named twice in one write ("a" and "a/x")
  if (user_share_ > 0 && uid != 0 && !(m & kStaged)) {
    uint64_t& used = share_used_[uid];
    if (used + ns_->node(id).size > user_share_) {
      over_share_++;
      return;
    }
    used += ns_->node(id).size;
  }
  named_++;
  const bool resident = Resident(id);
  if (resident) resident_when_named_++;
  marks_[id].store(m | kNamedNow | kStaged | (resident ? kCounted : 0), std::memory_order_relaxed);
  if (m & kStaged) return;
  if (staged_.empty()) started_ = std::chrono::steady_clock::now();
  staged_.push_back(id);
  queue_.push_back(id);
}

void StagePlanner::StageAll() {
  MutexLock lock(mu_);
  for (NodeId id = 0; id < ns_->size(); ++id) AddFile(id);
  if (!marks_) return;
  for (NodeId id = 0; id < ns_->size(); ++id) {
    marks_[id].fetch_and(static_cast<uint8_t>(~kNamedNow), std::memory_order_relaxed);
  }
}

void StagePlanner::Add(const HintParser::Result& result) {
  MutexLock lock(mu_);
  valid_ += result.valid;
  rejected_ += result.rejected;
  for (NodeId id : result.files) AddFile(id, result.uid);
  if (!marks_) return;
  for (NodeId id : result.files) {
    marks_[id].fetch_and(static_cast<uint8_t>(~kNamedNow), std::memory_order_relaxed);
  }
}

bool StagePlanner::Next(NodeId* id) {
  MutexLock lock(mu_);
  if (queue_.empty()) return false;
  *id = queue_.front();
  queue_.pop_front();
  return true;
}

size_t StagePlanner::queued() const {
  MutexLock lock(mu_);
  return queue_.size();
}

void StagePlanner::VisitCounters(CounterVisitor& v, bool background_idle) const {
  std::vector<NodeId> staged;
  size_t fed, queued;
  uint64_t valid, rejected;
  std::chrono::steady_clock::time_point started;
  {
    MutexLock lock(mu_);  // a copy of the list, not the walk, under the lock
    staged = staged_;
    queued = queue_.size();
    fed = staged_.size() - queued;
    valid = valid_;
    rejected = rejected_;
    started = started_;
  }
  uint64_t done_files = 0, done_bytes = 0, failed = 0, requested_bytes = 0;
  std::vector<NodeId> newly_resident;  // not counted in made_resident_bytes_ yet
  for (size_t i = 0; i < staged.size(); ++i) {
    NodeId id = staged[i];
    uint64_t size = ns_->node(id).size;
    requested_bytes += size;
    bool all = true, in_flight = false;
    for (uint32_t c = 0; c < catalog_->chunks(id); ++c) {
      uint8_t s = catalog_->state(ChunkKey{id, c});
      all = all && Catalog::IsResident(s);
      in_flight = in_flight || s == Catalog::kInFlight;
    }
    if (all) {
      done_files++;
      done_bytes += size;
      if (!(marks_[id].load(std::memory_order_relaxed) & kCounted)) newly_resident.push_back(id);
    } else if (i < fed && !in_flight && background_idle) {
      failed++;  // fed, settled, not resident: no room, or the copy failed
    }
  }
  uint64_t named, resident_when_named, made_resident_bytes, over_share;
  {
    MutexLock lock(mu_);
    for (NodeId id : newly_resident) {
      if (marks_[id].fetch_or(kCounted, std::memory_order_relaxed) & kCounted) continue;
      made_resident_bytes_ += ns_->node(id).size;
    }
    named = named_;
    resident_when_named = resident_when_named_;
    made_resident_bytes = made_resident_bytes_;
    over_share = over_share_;
  }
  double elapsed =
      staged.empty()
          ? 0
          : std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  double rate = elapsed > 0 ? done_bytes / elapsed : 0;
  v.Gauge("requested_files", static_cast<double>(staged.size()),
          {"Files asked to be staged through .tierfs/stage."});
  v.Gauge("requested_bytes", static_cast<double>(requested_bytes),
          {"Size of the files asked to be staged.", Unit::kBytes});
  v.Gauge("done_files", static_cast<double>(done_files),
          {"Staged files wholly resident in the tiers."});
  v.Gauge("done_bytes", static_cast<double>(done_bytes),
          {"Size of the staged files wholly resident in the tiers.", Unit::kBytes});
  v.Gauge("failed_files", static_cast<double>(failed),
          {"Staged files that could not be made resident (no room, or a failed copy)."});
  v.Gauge("queued_files", static_cast<double>(queued), {"Staged files not yet promoted."});
  v.Counter("over_share_files", over_share,
            {"Files a user asked to stage beyond her share of the tiers, not staged."});
  v.Counter("named_files", named,
            {"Files named to be staged, each time named (a directory names every file below "
             "it)."});
  v.Counter("resident_when_named_files", resident_when_named,
            {"Files named to be staged that were wholly resident in the tiers already."});
  v.Counter("made_resident_bytes", made_resident_bytes,
            {"Size of the staged files that became wholly resident after they were named, each "
             "file counted once.",
             Unit::kBytes});
  v.Counter("valid_lines", valid, {"Paths written to .tierfs/stage and accepted."});
  v.Counter("rejected_lines", rejected, {"Lines written to .tierfs/stage and rejected."});
  v.Gauge("rate_bytes_per_s", std::round(rate),
          {"Staged bytes made resident per second since staging started.", Unit::kBytesPerSecond});
  if (rate > 0) {  // unknown before the first staged byte is resident: left out
    const double left =
        static_cast<double>(requested_bytes - std::min(requested_bytes, done_bytes));
    v.Gauge("eta_seconds", std::round(left / rate * 10) / 10,
            {"Estimated time until every staged file is resident.", Unit::kSeconds});
  }
}

}  // namespace tierfs
