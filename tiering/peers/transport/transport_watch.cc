#include "tiering/peers/transport/transport_watch.h"

#include "tiering/base/log.h"

namespace tierfs {

namespace {
long long Minutes(std::chrono::seconds s) { return (s.count() + 59) / 60; }
}  // namespace

TransportWatch::TransportWatch(std::vector<Side> sides, Options options)
    : sides_(std::move(sides)), options_(std::move(options)), states_(sides_.size()) {}

TransportWatch::~TransportWatch() { Stop(); }

void TransportWatch::Start() {
  thread_ = std::thread([this] {
    MutexLock lock(mu_);
    while (!cv_.WaitFor(mu_, options_.period, [this]() REQUIRES(mu_) { return stop_; })) {
      lock.Unlock();
      if (options_.each_round) options_.each_round();
      lock.Lock();
      if (stop_) break;
      for (size_t i = 0; i < sides_.size(); ++i) Look(sides_[i], states_[i]);
    }
  });
}

void TransportWatch::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void TransportWatch::Check() {
  MutexLock lock(mu_);
  for (size_t i = 0; i < sides_.size(); ++i) Look(sides_[i], states_[i]);
}

bool TransportWatch::off(size_t i) const {
  MutexLock lock(mu_);
  return states_[i].off;
}

// Under mu_: Stop waits for a restart under way, which is bounded (the
// new worker is made within a limit, the old one is not waited for).
void TransportWatch::Look(const Side& side, State& state) {
  if (state.off || !side.failed()) return;
  const auto now = std::chrono::steady_clock::now();
  while (!state.recent.empty() && now - state.recent.front() >= options_.window)
    state.recent.pop_front();
  if (state.recent.size() >= options_.max_restarts) {
    state.off = true;
    TIERFS_LOG(kError,
               "peer transport: UCX failed on the {} side again, after {} restarts within {} "
               "minutes: that side stays off until the node is remounted (it reads SOURCE)",
               side.name, state.recent.size(), Minutes(options_.window));
    return;
  }
  if (Status s = side.restart(); !s.ok()) {
    state.off = true;
    TIERFS_LOG(kError,
               "peer transport: UCX failed on the {} side and could not be started again ({}): "
               "that side stays off until the node is remounted (it reads SOURCE)",
               side.name, s.message());
    return;
  }
  state.recent.push_back(now);
  TIERFS_LOG(kWarning,
             "peer transport: UCX failed on the {} side; started it again (restart {} of at most "
             "{} in {} minutes): its connections to peers are made anew",
             side.name, state.recent.size(), options_.max_restarts, Minutes(options_.window));
}

}  // namespace tierfs
