// TaskPool: a few threads over one bounded queue, for the blocking work a
// UCX progress thread must not do: MUNGE calls (an IPC to munged) and a
// provider's chunk reads (perhaps a promotion from SOURCE). Submit beyond
// the capacity is refused, never queued without limit. (prefetch's Executor
// is the same idea with lanes; tiering/ cannot use it.)
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "tiering/base/mutex.h"

namespace tierfs {

class TaskPool {
 public:
  TaskPool(unsigned threads, size_t capacity);
  ~TaskPool();  // Shutdown()
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // Queues `job`; false when the queue is full or the pool shut down.
  bool Submit(std::function<void()> job);
  // Drops the queued jobs (destroying them releases what they own), waits
  // for the running ones. Idempotent.
  void Shutdown();

 private:
  void Work();

  const size_t capacity_;
  Mutex mu_;  // guards queue_ and stopping_. A leaf lock, never held while a job runs.
  CondVar cv_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace tierfs
