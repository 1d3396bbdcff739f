#include "tiering/store/reclaimer.h"

#include <algorithm>

namespace tierfs {

InlineJobs* InlineJobs::Get() {
  static InlineJobs inline_jobs;
  return &inline_jobs;
}

Watermarks Watermarks::For(uint64_t limit, uint64_t chunk_size, bool runs_inline) {
  if (runs_inline) return {};
  const uint64_t high = std::min(limit / 8, std::max(2 * chunk_size, limit / 64));
  return {high / 2, high};
}

Reclaimer::Reclaimer(JobRunner* runner, size_t tiers, std::function<void(int)> reclaim)
    : runner_(runner),
      reclaim_(std::move(reclaim)),
      kicks_(std::make_unique<std::atomic<uint64_t>[]>(tiers)) {}

void Reclaimer::Kick(int t) {
  if (kicks_[static_cast<size_t>(t)].fetch_add(1) > 0) return;  // queued or running: it reruns
  if (!runner_->Run([this, t] { Run(t); })) {
    kicks_[static_cast<size_t>(t)].store(0);  // the next kick tries again
    refused_.fetch_add(1, std::memory_order_relaxed);
  }
}

void Reclaimer::Run(int t) {
  std::atomic<uint64_t>& kicks = kicks_[static_cast<size_t>(t)];
  uint64_t served = kicks.load();
  while (true) {
    runs_.fetch_add(1, std::memory_order_relaxed);
    reclaim_(t);
    // Done unless a kick came meanwhile: then `served` is the new count.
    if (kicks.compare_exchange_strong(served, 0)) return;
  }
}

}  // namespace tierfs
