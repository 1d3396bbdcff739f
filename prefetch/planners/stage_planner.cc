#include "prefetch/planners/stage_planner.h"

#include <cmath>

namespace tierfs {

StagePlanner::StagePlanner(const Namespace* ns, const Catalog* catalog)
    : ns_(ns), catalog_(catalog), marked_(catalog ? ns->size() : 0, 0) {}

void StagePlanner::AddFile(NodeId id) {
  if (!catalog_ || catalog_->chunks(id) == 0 || marked_[id]) return;
  if (staged_.empty()) started_ = std::chrono::steady_clock::now();
  marked_[id] = 1;
  staged_.push_back(id);
  queue_.push_back(id);
}

void StagePlanner::StageAll() {
  std::lock_guard lock(mu_);
  for (NodeId id = 0; id < ns_->size(); ++id) AddFile(id);
}

void StagePlanner::Add(const HintParser::Result& result) {
  std::lock_guard lock(mu_);
  valid_ += result.valid;
  rejected_ += result.rejected;
  for (NodeId id : result.files) AddFile(id);
}

bool StagePlanner::Next(NodeId* id) {
  std::lock_guard lock(mu_);
  if (queue_.empty()) return false;
  *id = queue_.front();
  queue_.pop_front();
  return true;
}

size_t StagePlanner::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void StagePlanner::VisitCounters(CounterVisitor& v, bool background_idle) const {
  std::vector<NodeId> staged;
  size_t fed, queued;
  uint64_t valid, rejected;
  std::chrono::steady_clock::time_point started;
  {
    std::lock_guard lock(mu_);  // a copy of the list, not the walk, under the lock
    staged = staged_;
    queued = queue_.size();
    fed = staged_.size() - queued;
    valid = valid_;
    rejected = rejected_;
    started = started_;
  }
  uint64_t done_files = 0, done_bytes = 0, failed = 0, requested_bytes = 0;
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
    } else if (i < fed && !in_flight && background_idle) {
      failed++;  // fed, settled, not resident: no room, or the copy failed
    }
  }
  double elapsed =
      staged.empty()
          ? 0
          : std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  double rate = elapsed > 0 ? done_bytes / elapsed : 0;
  double eta = rate > 0 ? (requested_bytes - done_bytes) / rate : -1;
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
  v.Counter("valid_lines", valid, {"Paths written to .tierfs/stage and accepted."});
  v.Counter("rejected_lines", rejected, {"Lines written to .tierfs/stage and rejected."});
  v.Gauge("rate_bytes_per_s", std::round(rate),
          {"Staged bytes made resident per second since staging started.", Unit::kBytesPerSecond});
  v.Gauge("eta_seconds", std::round(eta * 10) / 10,
          {"Estimated time until every staged file is resident (-1: unknown).", Unit::kSeconds});
}

}  // namespace tierfs
