// TransportWatch: makes a side of this node's peer transport (its asking,
// PeerClient, or its serving, PeerServer) again once UCX failed on it (an
// abort contained on its progress thread: ucx_abort.h), so that the node
// asks and serves its peers again within a fraction of a second instead of
// reading SOURCE for the rest of the job.
//
// One thread looks at each side every `period`. A side whose transport
// failed is given a new one (its `restart`: a new UCX context and worker,
// the old ones left as they are, never called again) at most
// `max_restarts` times in any `window`; one more failure in that window, or
// a restart that fails, and that side stays off (today's behaviour: the
// node reads SOURCE) and says so. Each restart and the giving up are one
// line of the log each, not one per peer.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tiering/base/mutex.h"
#include "tiering/base/status.h"

namespace tierfs {

class TransportWatch {
 public:
  struct Side {
    std::string name;              // "asking", "serving": as the log names it
    std::function<bool()> failed;  // its UCX failed (thread-safe)
    std::function<Status()> restart;
  };
  struct Options {
    size_t max_restarts = 3;
    std::chrono::seconds window{600};
    std::chrono::milliseconds period{100};
    // Run on the watch's thread before each look (the daemon's test hook).
    std::function<void()> each_round;
  };
  TransportWatch(std::vector<Side> sides, Options options);
  ~TransportWatch();  // Stop()
  TransportWatch(const TransportWatch&) = delete;
  TransportWatch& operator=(const TransportWatch&) = delete;

  void Start();
  // Ends the thread (a restart under way finishes first). Idempotent.
  void Stop();
  // One look at every side, as the thread takes every period. Not while
  // the thread runs.
  void Check();
  // Whether side `i` stays off for good.
  bool off(size_t i) const;

 private:
  struct State {
    std::deque<std::chrono::steady_clock::time_point> recent;  // restarts within the window
    bool off = false;
  };
  void Look(const Side& side, State& state) REQUIRES(mu_);

  const std::vector<Side> sides_;
  const Options options_;
  mutable Mutex mu_;  // guards stop_ and states_. A leaf lock but for Look's restart under it.
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<State> states_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace tierfs
