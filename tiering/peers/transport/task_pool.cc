#include "tiering/peers/transport/task_pool.h"

#include <exception>

#include "tiering/base/log.h"

namespace tierfs {

TaskPool::TaskPool(unsigned threads, size_t capacity) : capacity_(capacity) {
  for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

TaskPool::~TaskPool() { Shutdown(); }

bool TaskPool::Submit(std::function<void()> job) {
  {
    MutexLock lock(mu_);
    if (stopping_ || queue_.size() >= capacity_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.NotifyOne();
  return true;
}

void TaskPool::Shutdown() {
  std::deque<std::function<void()>> dropped;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  cv_.NotifyAll();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void TaskPool::Work() {
  while (true) {
    std::function<void()> job;
    {
      MutexLock lock(mu_);
      cv_.Wait(mu_, [&]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      job();
    } catch (const std::exception& e) {  // a job must not take the pool down
      TIERFS_LOG(kError, "peer task failed: {}", e.what());
    } catch (...) {
      TIERFS_LOG(kError, "peer task failed: unknown exception");
    }
  }
}

}  // namespace tierfs
