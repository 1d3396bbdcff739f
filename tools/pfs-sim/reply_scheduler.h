// Sends FUSE replies at their simulated completion time.
//
// A handler does its (fast, local) work at once, asks the model when the
// request would complete on the simulated PFS, and hands the reply to this
// scheduler. One thread sleeps until the earliest deadline and runs the
// reply, so a slow simulated request never holds a FUSE worker thread and any
// number of requests can be in flight.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace pfssim {

// Monotonic clock in nanoseconds, the time base of the model.
int64_t NowNs();

class ReplyScheduler {
 public:
  ReplyScheduler();
  ~ReplyScheduler();  // calls Stop()
  ReplyScheduler(const ReplyScheduler&) = delete;
  ReplyScheduler& operator=(const ReplyScheduler&) = delete;

  // Runs `reply` on the scheduler thread at `deadline_ns` (NowNs() base), or
  // at once if the deadline has passed. After Stop(), runs it inline.
  void At(int64_t deadline_ns, std::function<void()> reply);

  // Runs every pending reply now, in deadline order, and ends the thread.
  // Idempotent. Must be called before the FUSE session is destroyed.
  void Stop();

 private:
  struct Pending {
    int64_t deadline_ns;
    uint64_t seq;  // FIFO among equal deadlines
    std::function<void()> reply;
    bool operator>(const Pending& other) const {
      return deadline_ns != other.deadline_ns ? deadline_ns > other.deadline_ns : seq > other.seq;
    }
  };

  void Run();

  std::mutex mu_;  // guards queue_, next_seq_, stopping_
  std::condition_variable wake_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> queue_;
  uint64_t next_seq_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace pfssim
