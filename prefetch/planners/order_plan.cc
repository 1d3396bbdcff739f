#include "prefetch/planners/order_plan.h"

#include <algorithm>

namespace tierfs {

OrderPlan::OrderPlan(size_t nodes, size_t max_entries)
    : nodes_(nodes), max_entries_(std::min<size_t>(max_entries, kNone - 1)) {}

size_t OrderPlan::Append(const std::vector<NodeId>& files) {
  size_t added = 0;
  for (NodeId id : files) {
    if (seq_.size() >= max_entries_ || id >= nodes_) break;
    auto p = static_cast<uint32_t>(seq_.size());
    seq_.push_back(id);
    next_.push_back(kNone);
    done_.push_back(false);
    auto [it, fresh] = ends_.try_emplace(id, Ends{p, p});
    if (!fresh) {
      next_[it->second.last] = p;
      it->second.last = p;
    }
    added++;
  }
  return added;
}

void OrderPlan::Clear() {
  base_ = 0;
  seq_.clear();
  next_.clear();
  done_.clear();
  ends_.clear();
  cursor_ = 0;
  consumed_ = 0;
  consumed_here_ = 0;
}

void OrderPlan::ConsumeAt(uint32_t p) {
  auto it = ends_.find(seq_[p]);
  if (next_[p] == kNone) {
    ends_.erase(it);
  } else {
    it->second.head = next_[p];
  }
  done_[p] = true;
  consumed_++;
  consumed_here_++;
}

uint64_t OrderPlan::StartEpoch() {
  uint64_t abandoned = 0;
  // In position order, each unconsumed position is its file's head.
  for (uint32_t p = 0; p < seq_.size(); ++p) {
    if (done_[p]) continue;
    ConsumeAt(p);
    consumed_--;  // abandoned, not read
    abandoned++;
  }
  cursor_ = size();
  CompactIfDone();
  return abandoned;
}

bool OrderPlan::Consume(NodeId id) {
  auto it = ends_.find(id);
  if (it == ends_.end()) return false;
  uint32_t p = it->second.head;
  ConsumeAt(p);
  cursor_ = std::max<uint64_t>(cursor_, base_ + p + 1);
  CompactIfDone();
  return true;
}

void OrderPlan::CompactIfDone() {
  if (consumed_here_ != seq_.size() || seq_.empty()) return;
  base_ += seq_.size();
  seq_.clear();
  next_.clear();
  done_.clear();
  consumed_here_ = 0;
}

uint64_t OrderPlan::NextUse(NodeId id) const {
  auto it = ends_.find(id);
  return it == ends_.end() ? kNever : base_ + it->second.head;
}

uint64_t OrderPlan::FollowingUse(NodeId id) const {
  auto it = ends_.find(id);
  if (it == ends_.end() || next_[it->second.head] == kNone) return kNever;
  return base_ + next_[it->second.head];
}

}  // namespace tierfs
