// Executor: the promotion thread pool. Two lanes: foreground jobs (a reader
// is waiting) always run before background ones (stage-in, look-ahead).
// Bounded: a lane holds at most `capacity` queued jobs; Submit beyond that
// is rejected and counted, never queued without limit.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tierfs {

class Executor {
 public:
  enum class Lane { kForeground = 0, kBackground = 1 };
  struct Job {
    std::function<void()> run;
    std::function<void()> cancel;  // called instead of run if the job is dropped at shutdown
  };

  // No thread runs until Start(): a daemon forks after construction.
  Executor(unsigned threads, size_t capacity);
  ~Executor();  // Shutdown()

  // Starts the worker threads. Jobs submitted before wait in their lanes.
  void Start();

  // Queues a job; false if the lane is full or the executor is shut down.
  bool Submit(Lane lane, Job job);
  // Stops accepting jobs, cancels the queued ones, waits for running ones.
  void Shutdown();
  // True once Shutdown began: long jobs should give up early.
  bool stopping() const { return stopping_.load(std::memory_order_relaxed); }

  unsigned threads() const { return threads_; }
  size_t capacity() const { return capacity_; }
  size_t queued(Lane lane) const;
  unsigned running() const { return running_.load(std::memory_order_relaxed); }
  uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }
  uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }

 private:
  void Work();

  const unsigned threads_;
  const size_t capacity_;
  mutable std::mutex mu_;  // guards lanes_; a leaf lock, never held while a job runs
  std::condition_variable cv_;
  std::deque<Job> lanes_[2];
  std::atomic<bool> stopping_{false};
  std::atomic<unsigned> running_{0};
  std::atomic<uint64_t> rejected_{0}, completed_{0};
  std::vector<std::thread> workers_;
};

}  // namespace tierfs
