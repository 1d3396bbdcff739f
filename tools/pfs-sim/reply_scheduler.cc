#include "reply_scheduler.h"

#include <chrono>

namespace pfssim {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ReplyScheduler::ReplyScheduler() : thread_([this] { Run(); }) {}

ReplyScheduler::~ReplyScheduler() { Stop(); }

void ReplyScheduler::At(int64_t deadline_ns, std::function<void()> reply) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      const bool earliest = queue_.empty() || deadline_ns < queue_.top().deadline_ns;
      queue_.push(Pending{deadline_ns, next_seq_++, std::move(reply)});
      if (earliest) wake_.notify_one();
      return;
    }
  }
  reply();  // stopped: nobody would run it later
}

void ReplyScheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ReplyScheduler::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (queue_.empty()) {
      if (stopping_) return;
      wake_.wait(lock);
      continue;
    }
    const int64_t deadline = queue_.top().deadline_ns;
    if (!stopping_ && deadline > NowNs()) {
      wake_.wait_until(lock,
                       std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline)));
      continue;
    }
    // Pop and run without the lock: a reply may take a while in the kernel.
    std::function<void()> reply = std::move(const_cast<Pending&>(queue_.top()).reply);
    queue_.pop();
    lock.unlock();
    reply();
    lock.lock();
  }
}

}  // namespace pfssim
