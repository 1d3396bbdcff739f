// Executor: the daemon's one kind of thread pool. Three lanes, served in
// order: foreground (a reader is waiting; the store's reclaimer, queued
// first), look-ahead (the declared order's next files), background
// (stage-in, a file's later chunks). Bounded: a lane
// holds at most `capacity` queued jobs; Submit beyond that is rejected and
// counted, never queued without limit. At most `active_limit` jobs run at
// once (the promotion tuner moves it between 1 and the thread count; the
// namespace scan's tuner grows the pool too). The promotions use one, the
// scan one while it runs; TaskPool below is one for the peers' blocking
// work (handshakes, munged checks, a server's chunk reads).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/mutex.h"

namespace tierfs {

class Executor {
 public:
  enum class Lane { kForeground = 0, kLookahead = 1, kBackground = 2 };
  static constexpr int kLanes = 3;
  struct Job {
    // A job dropped at shutdown (or refused) is destroyed without running:
    // what it captured cleans up (a ChunkClaim undoes its reservation).
    std::function<void()> run;
  };

  // No thread runs until Start(): a daemon forks after construction.
  // `name` says whose pool it is in the log ("promotion", "peer server").
  Executor(unsigned threads, size_t capacity, const char* name = "promotion");
  ~Executor();  // Shutdown()

  // Starts the worker threads. Jobs submitted before wait in their lanes.
  void Start();
  // Started: more worker threads, up to `threads` in all (never fewer).
  // Ignored before Start and once Shutdown began.
  void Grow(unsigned threads);

  // Where a job joins its lane: behind the jobs queued there, or ahead of
  // them (a short job they wait on: the store's reclaimer, whose room the
  // readers' claims need).
  enum class Place { kLast, kFirst };
  // Queues a job; false if the lane is full or the executor is shut down.
  bool Submit(Lane lane, Job job, Place place = Place::kLast);
  // Stops accepting jobs, cancels the queued ones, waits for running ones.
  void Shutdown();
  // True once Shutdown began: long jobs should give up early.
  bool stopping() const { return stopping_.load(std::memory_order_relaxed); }

  unsigned threads() const { return threads_.load(std::memory_order_relaxed); }
  // Jobs allowed to run at once, 1..threads().
  unsigned active_limit() const { return active_limit_.load(std::memory_order_relaxed); }
  void SetActiveLimit(unsigned n);
  size_t capacity() const { return capacity_; }
  size_t queued(Lane lane) const;
  unsigned running() const { return running_.load(std::memory_order_relaxed); }
  uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }
  uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }
  // threads, queued per lane, running (gauges).
  void VisitCounters(CounterVisitor& v) const;

 private:
  void Work();

  std::atomic<unsigned> threads_;  // written under mu_ (Grow)
  const size_t capacity_;
  const char* const name_;
  mutable Mutex mu_;  // guards lanes_; a leaf lock, never held while a job runs
  CondVar cv_;
  std::deque<Job> lanes_[kLanes] GUARDED_BY(mu_);
  std::atomic<unsigned> active_limit_;
  std::atomic<bool> stopping_{false};
  std::atomic<unsigned> running_{0};
  std::atomic<uint64_t> rejected_{0}, completed_{0};
  // Made by Start and Grow under mu_ before stopping_, joined by Shutdown once stopping_.
  std::vector<std::thread> workers_;
};

// An Executor of one lane, started at once: a few threads for the blocking
// work a network thread must not do (a TCP handshake, an IPC to munged, a
// chunk read that may promote from SOURCE). Made after the daemon forks.
class TaskPool {
 public:
  TaskPool(unsigned threads, size_t capacity, const char* name) : pool_(threads, capacity, name) {
    pool_.Start();
  }
  // Queues `job`; false when the queue is full or the pool shut down.
  bool Submit(std::function<void()> job) {
    return pool_.Submit(Executor::Lane::kForeground, Executor::Job{std::move(job)});
  }
  // Drops the queued jobs (destroying them releases what they own), waits
  // for the running ones. Idempotent.
  void Shutdown() { pool_.Shutdown(); }

 private:
  Executor pool_;
};

}  // namespace tierfs
