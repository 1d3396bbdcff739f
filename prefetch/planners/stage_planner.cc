#include "prefetch/planners/stage_planner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tiering/base/log.h"

namespace tierfs {

StagePlanner::StagePlanner(const Namespace* ns, const Catalog* catalog, uint64_t user_share)
    : ns_(ns),
      catalog_(catalog),
      user_share_(user_share),
      marks_(catalog ? std::make_unique<std::atomic<uint8_t>[]>(ns->size()) : nullptr) {}

const char* StagePlanner::FailureName(Failure f) {
  static constexpr const char* kNames[kFailures] = {
      "no_room", "tier_full", "tier_error", "source", "permission", "over_share", "not_kept"};
  return kNames[static_cast<size_t>(f)];
}

const char* StagePlanner::FailureText(Failure f) {
  static constexpr const char* kTexts[kFailures] = {
      "fit in no tier (the tiers are full of other files, or smaller than the file)",
      "a tier's disk is full",
      "a tier could not be written",
      "SOURCE could not be read",
      "permission denied (reading SOURCE or writing a tier)",
      "over your share of the tiers (the stage share)",
      "not kept here (evicted since, or another node keeps them)"};
  return kTexts[static_cast<size_t>(f)];
}

const char* StagePlanner::FailureShort(Failure f) {
  static constexpr const char* kShort[kFailures] = {
      "fit in no tier",    "tier full",  "tier error",   "SOURCE error",
      "permission denied", "over share", "not kept here"};
  return kShort[static_cast<size_t>(f)];
}

bool StagePlanner::Resident(NodeId id) const {
  for (uint32_t c = 0; c < catalog_->chunks(id); ++c) {
    if (!Catalog::IsResident(catalog_->state(ChunkKey{id, c}))) return false;
  }
  return true;
}

bool StagePlanner::InFlight(NodeId id) const {
  for (uint32_t c = 0; c < catalog_->chunks(id); ++c) {
    if (catalog_->state(ChunkKey{id, c}) == Catalog::kInFlight) return true;
  }
  return false;
}

StagePlanner::Failure StagePlanner::Why(NodeId id) const {
  if (no_room_.count(id) != 0) return Failure::kNoRoom;
  switch (store_ ? store_->LastFailure(id) : ChunkStore::Failure::kNone) {
    case ChunkStore::Failure::kSource:
      return Failure::kSource;
    case ChunkStore::Failure::kPermission:
      return Failure::kPermission;
    case ChunkStore::Failure::kTierFull:
      return Failure::kTierFull;
    case ChunkStore::Failure::kTier:
      return Failure::kTierError;
    case ChunkStore::Failure::kNone:
      break;
  }
  return Failure::kNotKept;
}

void StagePlanner::AddFile(NodeId id, uid_t uid, bool ask) {
  if (!catalog_ || catalog_->chunks(id) == 0) return;
  const uint8_t m = marks_[id].load(std::memory_order_relaxed);
  if (m & kNamedNow) return;  // named twice in one write ("a" and "a/x")
  if (user_share_ > 0 && uid != 0 && !(m & kStaged)) {
    uint64_t& used = share_used_[uid];
    if (used + ns_->node(id).size > user_share_) {
      over_share_++;
      if (ask) {
        asked_++;
        failed_[static_cast<size_t>(Failure::kOverShare)]++;
      }
      return;
    }
    used += ns_->node(id).size;
  }
  named_++;
  const bool resident = Resident(id);
  if (resident) resident_when_named_++;
  if (ask) {
    asked_++;
    if (resident) {
      asked_resident_++;
    } else {
      pending_[id]++;
    }
  }
  // A file asked for again that is not resident, nor queued or being
  // copied, is tried again (its tier may have room now).
  const bool queue = !(m & kStaged) || (ask && !resident && !(m & kQueued) && !InFlight(id));
  marks_[id].store(m | kNamedNow | kStaged | (resident ? kCounted : 0) | (queue ? kQueued : 0),
                   std::memory_order_relaxed);
  if (!(m & kStaged)) {
    if (staged_.empty()) started_ = std::chrono::steady_clock::now();
    staged_.push_back(id);
  }
  if (queue) queue_.push_back(id);
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
  for (NodeId id : result.files) AddFile(id, result.uid, /*ask=*/true);
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
  marks_[*id].fetch_and(static_cast<uint8_t>(~kQueued), std::memory_order_relaxed);
  return true;
}

void StagePlanner::NoRoom(NodeId id) {
  MutexLock lock(mu_);
  if (pending_.count(id) != 0) no_room_.insert(id);
}

void StagePlanner::Settle() {
  if (!catalog_) return;
  std::array<uint64_t, kFailures> failed{};
  std::array<std::vector<std::string>, kFailures> first;  // a few files of each reason
  {
    MutexLock lock(mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      const NodeId id = it->first;
      if ((marks_[id].load(std::memory_order_relaxed) & kQueued) || InFlight(id)) {
        ++it;
        continue;
      }
      if (Resident(id)) {
        asked_resident_ += it->second;
      } else {
        const auto why = static_cast<size_t>(Why(id));
        failed_[why] += it->second;
        failed[why] += it->second;
        if (first[why].size() < 3) first[why].push_back(ns_->Path(id));
      }
      no_room_.erase(id);
      it = pending_.erase(it);
    }
  }
  const auto now = std::chrono::steady_clock::now();
  for (size_t f = 0; f < kFailures; ++f) {
    if (failed[f] == 0 ||
        (logged_[f] != std::chrono::steady_clock::time_point{} && now - logged_[f] < kLogEvery)) {
      continue;
    }
    logged_[f] = now;
    TIERFS_LOG(kWarning, "stage: {} {} not made resident: {} (first: '{}')", failed[f],
               failed[f] == 1 ? "file" : "files", FailureText(static_cast<Failure>(f)),
               fmt::join(first[f], "', '"));
  }
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
  uint64_t done_files = 0, done_bytes = 0, not_resident = 0, requested_bytes = 0;
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
      not_resident++;  // fed, settled, not resident: no room, or the copy failed
    }
  }
  uint64_t named, resident_when_named, made_resident_bytes, over_share, asked, asked_resident;
  std::array<uint64_t, kFailures> failed_by{};
  {
    MutexLock lock(mu_);
    asked = asked_;
    asked_resident = asked_resident_;
    failed_by = failed_;
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
  v.Gauge("not_resident_files", static_cast<double>(not_resident),
          {"Staged files (asked for, or staged in) tried and not resident now."});
  v.Counter("asked_files", asked, {"Files asked for through .tierfs/stage, each time asked."});
  v.Counter("asked_resident_files", asked_resident,
            {"Files asked for that were resident when asked or made resident since, each time "
             "asked."});
  uint64_t failed = 0;
  for (uint64_t n : failed_by) failed += n;
  v.Counter("failed_files", failed,
            {"Files asked for that could not be made resident, each time asked, for every "
             "reason."});
  for (size_t f = 0; f < kFailures; ++f) {
    v.Counter(fmt::format("failed_{}_files", FailureName(static_cast<Failure>(f))), failed_by[f],
              {fmt::format("Asks that ended with the file not resident: {}.",
                           FailureText(static_cast<Failure>(f)))});
  }
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
