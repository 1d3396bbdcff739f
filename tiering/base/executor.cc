#include "tiering/base/executor.h"

#include <algorithm>
#include <exception>

#include "tiering/base/log.h"

namespace tierfs {

Executor::Executor(unsigned threads, size_t capacity, const char* name)
    : threads_(threads), capacity_(capacity), name_(name), active_limit_(threads) {}

void Executor::SetActiveLimit(unsigned n) {
  {
    MutexLock lock(mu_);
    active_limit_.store(std::clamp(n, 1u, threads()));
  }
  cv_.NotifyAll();
}

void Executor::Start() {
  MutexLock lock(mu_);
  if (!workers_.empty() || stopping()) return;
  for (unsigned i = 0; i < threads(); ++i) workers_.emplace_back([this] { Work(); });
}

void Executor::Grow(unsigned threads) {
  MutexLock lock(mu_);
  if (workers_.empty() || stopping()) return;
  while (workers_.size() < threads) workers_.emplace_back([this] { Work(); });
  threads_.store(static_cast<unsigned>(workers_.size()));
}

Executor::~Executor() { Shutdown(); }

bool Executor::Submit(Lane lane, Job job, Place place) {
  {
    MutexLock lock(mu_);
    auto& q = lanes_[static_cast<int>(lane)];
    if (stopping() || q.size() >= capacity_) {
      rejected_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (place == Place::kFirst) {
      q.push_front(std::move(job));
    } else {
      q.push_back(std::move(job));
    }
  }
  cv_.NotifyOne();
  return true;
}

size_t Executor::queued(Lane lane) const {
  MutexLock lock(mu_);
  return lanes_[static_cast<int>(lane)].size();
}

void Executor::Work() {
  while (true) {
    Job job;
    {
      MutexLock lock(mu_);
      std::deque<Job>* q = nullptr;
      cv_.Wait(mu_, [&]() REQUIRES(mu_) {
        if (stopping()) return true;
        if (running_.load(std::memory_order_relaxed) >= active_limit()) return false;
        for (auto& lane : lanes_) {  // foreground, then look-ahead, then background
          if (!lane.empty()) {
            q = &lane;
            return true;
          }
        }
        return false;
      });
      if (stopping()) return;
      job = std::move(q->front());
      q->pop_front();
      running_.fetch_add(1, std::memory_order_relaxed);
    }
    try {
      job.run();
    } catch (...) {  // a job must not take the pool down
      TIERFS_LOG(kError, "{} job failed: {}", name_, DescribeCurrentException());
    }
    job = {};  // what it owns is released (a claim undone) before the job counts as done
    {
      MutexLock lock(mu_);  // so a worker waiting on the limit sees the change
      running_.fetch_sub(1, std::memory_order_relaxed);
    }
    completed_.fetch_add(1, std::memory_order_relaxed);
    // Workers wait for a place only while the active limit is below the
    // thread count (the promotions' and the scan's tuners): the place this
    // job freed is one waiter's. A pool at full width (a TaskPool) has no
    // one to wake, and waking idle threads after every job (all of them:
    // up to 512 in a scan) costs the cores the jobs need.
    if (active_limit() < threads()) cv_.NotifyOne();
  }
}

void Executor::Shutdown() {
  std::deque<Job> dropped;
  {
    MutexLock lock(mu_);
    if (stopping()) return;
    stopping_.store(true);
    for (auto& q : lanes_) {
      for (auto& j : q) dropped.push_back(std::move(j));
      q.clear();
    }
  }
  cv_.NotifyAll();
  // Destroyed here, in submission order per lane, without mu_ held: their
  // captures may take other locks as they clean up.
  while (!dropped.empty()) dropped.pop_front();
  for (auto& t : workers_) t.join();
}

void Executor::VisitCounters(CounterVisitor& v) const {
  v.Gauge("threads", threads(), {"Promotion worker threads."});
  v.Gauge(
      "queued_foreground", static_cast<double>(queued(Lane::kForeground)),
      {"Chunks being read whose promotion waits for a thread.", Unit::kChunks, "queued_for_reads"});
  v.Gauge("queued_lookahead", static_cast<double>(queued(Lane::kLookahead)),
          {"Chunks to read ahead of the readers whose promotion waits for a thread.", Unit::kChunks,
           "queued_read_ahead"});
  v.Gauge("queued_background", static_cast<double>(queued(Lane::kBackground)),
          {"Chunks promoted in the background (a file's next chunks, staging) waiting for a "
           "thread.",
           Unit::kChunks});
  v.Gauge("running", running(), {"Chunks whose promotion is running now.", Unit::kChunks});
}

}  // namespace tierfs
