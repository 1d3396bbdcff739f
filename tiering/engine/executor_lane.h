// ExecutorLane: one lane of the pool (tiering/base/executor.h) as the
// store's JobRunner, so the store's reclaimer runs on the background lane.
#pragma once

#include <functional>
#include <utility>

#include "tiering/base/executor.h"
#include "tiering/store/reclaimer.h"

namespace tierfs {

// One lane of an executor as a JobRunner: the store's reclaimer runs on the
// background lane, behind readers' and look-ahead promotions.
class ExecutorLane final : public JobRunner {
 public:
  ExecutorLane(Executor* executor, Executor::Lane lane) : executor_(executor), lane_(lane) {}
  bool Run(std::function<void()> job) override {
    return executor_->Submit(lane_, Executor::Job{std::move(job)});
  }

 private:
  Executor* const executor_;
  const Executor::Lane lane_;
};

}  // namespace tierfs
