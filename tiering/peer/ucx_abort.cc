#include "tiering/peer/ucx_abort.h"

#include <signal.h>
#include <unistd.h>

#include <mutex>

namespace tierfs::ucx_abort {
namespace {

// The flag of the worker whose UCX call this thread is in; nullptr outside.
// Static TLS (the library is linked into the executable): readable from a
// signal handler.
thread_local std::atomic<bool>* t_wedged = nullptr;

struct sigaction g_prior;  // SIGABRT's handler before Contain()
std::once_flag g_once;

void OnAbort(int sig, siginfo_t* info, void* context) {
  if (std::atomic<bool>* wedged = t_wedged) {
    wedged->store(true);  // lock-free: async-signal-safe
    static const char kSaid[] =
        "tierfs: peer transport: UCX failed a check of its own (above) on its progress thread; "
        "this node asks and serves no peer until it is remounted, and reads SOURCE instead\n";
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kSaid, sizeof kSaid - 1);
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, nullptr);
    for (;;) ::pause();
  }
  // Not in UCX: as if this handler were not there.
  if (g_prior.sa_flags & SA_SIGINFO) {
    g_prior.sa_sigaction(sig, info, context);
  } else if (g_prior.sa_handler == SIG_DFL) {
    ::signal(SIGABRT, SIG_DFL);
    ::raise(SIGABRT);
  } else if (g_prior.sa_handler != SIG_IGN) {
    g_prior.sa_handler(sig);
  }
}

}  // namespace

void Contain() {
  std::call_once(g_once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = &OnAbort;
    sa.sa_flags = SA_SIGINFO;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(SIGABRT, &sa, &g_prior);
  });
}

InUcx::InUcx(std::atomic<bool>* wedged) : prev_(t_wedged) { t_wedged = wedged; }
InUcx::~InUcx() { t_wedged = prev_; }

}  // namespace tierfs::ucx_abort
