// ExecutorLane: one lane of the pool (tiering/base/executor.h) as the
// store's JobRunner, so the store's reclaimer runs on a pool thread.
#pragma once

#include <functional>
#include <utility>

#include "tiering/base/executor.h"
#include "tiering/store/reclaimer.h"

namespace tierfs {

// One lane of an executor as a JobRunner, each job joining it at `place`.
class ExecutorLane final : public JobRunner {
 public:
  ExecutorLane(Executor* executor, Executor::Lane lane,
               Executor::Place place = Executor::Place::kLast)
      : executor_(executor), lane_(lane), place_(place) {}
  bool Run(std::function<void()> job) override {
    return executor_->Submit(lane_, Executor::Job{std::move(job)}, place_);
  }

 private:
  Executor* const executor_;
  const Executor::Lane lane_;
  const Executor::Place place_;
};

}  // namespace tierfs
