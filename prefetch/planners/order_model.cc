#include "prefetch/planners/order_model.h"

#include <algorithm>

namespace tierfs {

OrderModel::OrderModel(size_t nodes, size_t max_entries, const Catalog* catalog,
                       NextUseTable* next_uses, BeladyPolicy* policy)
    : catalog_(catalog),
      next_uses_(next_uses),
      policy_(policy),
      planner_(nodes, max_entries, next_uses) {}

void OrderModel::SetActive(bool active) {
  if (next_uses_) next_uses_->SetActive(active);
}

void OrderModel::NotifyChanged(std::vector<NodeId>& changed) {
  if (!policy_ || changed.empty()) return;
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (NodeId id : changed) policy_->NextUseChanged(id);
}

bool OrderModel::Declare(uint64_t writer, const HintParser::Result& r) {
  StreamPlanner::Appended appended;
  {
    MutexLock lock(mu_);
    planner_.Append(writer, r, &appended);
  }
  NotifyChanged(appended.changed);
  return !r.files.empty() || !r.marks.empty();
}

void OrderModel::Clear() {
  std::vector<NodeId> changed;
  {
    MutexLock lock(mu_);
    changed = planner_.Clear();
  }
  // The policy hears of it, so transient chunks kept for those uses go.
  NotifyChanged(changed);
}

bool OrderModel::OnRead(NodeId id, uint64_t off, uint64_t len, bool hit, Clock::time_point now) {
  // Files of one chunk are never in reading_ (nor without tiers).
  if (catalog_ == nullptr || catalog_->chunks(id) < 2) {
    return off == 0 && Consume(id, hit, now, std::nullopt);
  }
  // The chunk holding the read's last byte: the one its reader is in.
  const auto chunk = static_cast<uint32_t>((off + len - 1) / catalog_->chunk_size());
  if (off == 0) return Consume(id, hit, now, chunk);
  // A later piece: how far its reader is.
  if (reading_size_.load(std::memory_order_relaxed) == 0) return false;
  {
    MutexLock lock(mu_);
    auto it = reading_.find(id);
    if (it == reading_.end()) return false;
    it->second.last = now;
    if (chunk <= it->second.chunk) return false;
    it->second.chunk = chunk;
    if (next_uses_) next_uses_->SetReading(id, chunk, it->second.occurrence);
  }
  // The chunks it passed are read: their transient copies may go.
  if (policy_) policy_->NextUseChanged(id);
  return false;
}

bool OrderModel::Consume(NodeId id, bool hit, Clock::time_point now,
                         std::optional<uint32_t> chunk) {
  std::vector<NodeId> changed;
  {
    MutexLock lock(mu_);
    uint64_t occurrence = 0;
    if (!planner_.Consume(id, hit, now, &occurrence)) return false;
    if (chunk) {
      if (reading_.size() >= kMaxReading && !reading_.count(id)) ExpireReading(now, &changed);
      if (reading_.size() < kMaxReading || reading_.count(id)) {
        reading_[id] = Reading{*chunk, occurrence, now};
        if (next_uses_) next_uses_->SetReading(id, *chunk, occurrence);
      }
      reading_size_.store(reading_.size(), std::memory_order_relaxed);
    }
  }
  changed.push_back(id);
  NotifyChanged(changed);
  return true;
}

void OrderModel::ExpireReading(Clock::time_point now, std::vector<NodeId>* changed) {
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

void OrderModel::ExpireQuiet(Clock::time_point now) {
  if (reading_size_.load(std::memory_order_relaxed) == 0) return;
  std::vector<NodeId> quiet;
  {
    MutexLock lock(mu_);
    ExpireReading(now, &quiet);
  }
  NotifyChanged(quiet);
}

std::vector<NodeId> OrderModel::Lookahead(size_t window, uint64_t max_bytes,
                                          const StreamPlanner::ReadyFn& ready,
                                          const StreamPlanner::SizeFn& size) {
  std::vector<NodeId> next, changed;
  {
    MutexLock lock(mu_);
    next = planner_.Lookahead(window, max_bytes, ready, size, &changed);
  }
  NotifyChanged(changed);
  return next;
}

uint64_t OrderModel::min_lead() const {
  MutexLock lock(mu_);
  return planner_.min_lead();
}

void OrderModel::VisitCounters(CounterVisitor& v) const {
  MutexLock lock(mu_);
  planner_.VisitCounters(v);
}

}  // namespace tierfs
