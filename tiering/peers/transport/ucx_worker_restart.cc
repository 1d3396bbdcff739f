// UcxWorker: what a restart of the peer transport needs of it (a new
// worker made within a bound) and the tests' way to a wedged one.
#include <signal.h>
#include <unistd.h>

#include <optional>
#include <thread>

#include "tiering/base/mutex.h"
#include "tiering/peers/transport/ucx_worker.h"

namespace tierfs {

Result<std::unique_ptr<UcxWorker>> UcxWorker::MakeWithin(const Options& options,
                                                         std::chrono::milliseconds limit) {
  // Shared by the caller and the making thread, which may outlive it.
  struct Making {
    Mutex mu;  // guards the rest. A leaf lock.
    CondVar cv;
    std::optional<Result<std::unique_ptr<UcxWorker>>> made GUARDED_BY(mu);
    bool given_up GUARDED_BY(mu) = false;
  };
  auto making = std::make_shared<Making>();
  std::thread([making, options] {
    auto made = Make(options);
    MutexLock lock(making->mu);
    if (making->given_up) {
      // Too late: its caller stays without peers. Never destroyed either
      // (ucp_worker_destroy might meet the lock that held it up).
      if (made.ok()) (void)std::move(made).value().release();
      return;
    }
    making->made.emplace(std::move(made));
    making->cv.NotifyAll();
  }).detach();
  MutexLock lock(making->mu);
  if (!making->cv.WaitFor(making->mu, limit,
                          [&]() REQUIRES(making->mu) { return making->made.has_value(); })) {
    making->given_up = true;
    return Status::Error(ETIMEDOUT, "UCX did not make a new worker in time");
  }
  return std::move(*making->made);
}

void UcxWorker::WedgeForTest() {
  Post([this] {
    wedged_.store(true);
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, nullptr);
    for (;;) ::pause();
  });
}

void UcxWorker::Abandon() {
  if (thread_.joinable()) thread_.detach();
  abandoned_ = true;
  MutexLock lock(mu_);
  stopping_ = true;
  posted_.clear();  // never run: they would call UCX
}

}  // namespace tierfs
