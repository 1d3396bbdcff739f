#include "prefetch/order_plan.h"

#include <algorithm>

namespace tierfs {

OrderPlan::OrderPlan(size_t nodes, size_t max_entries)
    : max_entries_(std::min<size_t>(max_entries, kNone - 1)),
      head_(nodes, kNone),
      last_(nodes, kNone) {}

size_t OrderPlan::Append(const std::vector<NodeId>& files) {
  size_t added = 0;
  for (NodeId id : files) {
    if (seq_.size() >= max_entries_ || id >= head_.size()) break;
    auto p = static_cast<uint32_t>(seq_.size());
    seq_.push_back(id);
    next_.push_back(kNone);
    done_.push_back(false);
    if (last_[id] != kNone) next_[last_[id]] = p;
    last_[id] = p;
    if (head_[id] == kNone) head_[id] = p;
    added++;
  }
  return added;
}

void OrderPlan::Clear() {
  seq_.clear();
  next_.clear();
  done_.clear();
  std::fill(head_.begin(), head_.end(), kNone);
  std::fill(last_.begin(), last_.end(), kNone);
  cursor_ = 0;
  consumed_ = 0;
}

bool OrderPlan::Consume(NodeId id) {
  if (id >= head_.size() || head_[id] == kNone) return false;
  uint32_t p = head_[id];
  head_[id] = next_[p];
  done_[p] = true;
  consumed_++;
  cursor_ = std::max<uint64_t>(cursor_, p + 1ull);
  return true;
}

uint64_t OrderPlan::NextUse(NodeId id) const {
  if (id >= head_.size() || head_[id] == kNone) return kNever;
  return head_[id];
}

uint64_t OrderPlan::FollowingUse(NodeId id) const {
  if (id >= head_.size() || head_[id] == kNone || next_[head_[id]] == kNone) return kNever;
  return next_[head_[id]];
}

bool OrderPlan::Unconsumed(uint64_t p) const { return !done_[p]; }

}  // namespace tierfs
