#include "tiering/peers/transport/ucx_abort.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "tiering/base/log.h"
#include "tiering/base/mutex.h"

namespace tierfs::ucx_abort {
namespace {

// The flag of the worker whose UCX call this thread is in; nullptr outside.
// Static TLS (the library is linked into the executable): readable from a
// signal handler.
thread_local std::atomic<bool>* t_wedged = nullptr;

struct sigaction g_prior;  // SIGABRT's handler before Contain()
std::once_flag g_once;

// A function's code, [begin, end); empty if not found.
struct Range {
  uintptr_t begin = 0, end = 0;
  bool Holds(uintptr_t pc) const { return pc >= begin && pc < end; }
};
Range g_fatal[2];  // ucs_fatal_error_message, ucs_fatal_error_format; set before the handler

Range CodeOf(const char* name) {
  void* addr = ::dlsym(RTLD_DEFAULT, name);
  if (addr == nullptr) return {};
  Dl_info info;
  void* entry = nullptr;  // the symbol's ElfW(Sym)
  if (::dladdr1(addr, &info, &entry, RTLD_DL_SYMENT) == 0 || entry == nullptr) return {};
  const auto* sym = static_cast<const ElfW(Sym)*>(entry);
  if (sym->st_size == 0) return {};
  const auto begin = reinterpret_cast<uintptr_t>(addr);
  return {begin, begin + sym->st_size};
}

// Whether this thread's stack holds a return address into UCX's
// fatal-error functions. backtrace() was called once in Contain(): it does
// not load libgcc_s here.
bool FromUcxFatalError() {
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  for (int i = 0; i < n; ++i) {
    // The call to abort() may be a function's last instruction: its return
    // address is then one past the end, so look at the byte before it.
    const uintptr_t pc = reinterpret_cast<uintptr_t>(frames[i]) - 1;
    for (const Range& r : g_fatal) {
      if (r.Holds(pc)) return true;
    }
  }
  return false;
}

// A copy of the process with only this thread, killed by SIGABRT with the
// default action: a core of this moment. By the clone system call, not
// fork(), whose atfork handlers take malloc's locks (maybe held by the
// thread that aborted). The child makes system calls only: glibc's
// thread descriptor there still names this thread (raise() would signal
// it). Returns when the copy has ended.
void LeaveCore() {
  const long pid = ::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
  if (pid == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGABRT, &dfl, nullptr);
    sigset_t abrt;
    ::sigemptyset(&abrt);
    ::sigaddset(&abrt, SIGABRT);
    ::syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &abrt, nullptr, sizeof(uint64_t));
    ::syscall(SYS_kill, ::syscall(SYS_getpid), SIGABRT);
    ::syscall(SYS_exit_group, 127);
  }
  if (pid > 0) {
    int status;
    while (::waitpid(static_cast<pid_t>(pid), &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void OnAbort(int sig, siginfo_t* info, void* context) {
  std::atomic<bool>* wedged = t_wedged;
  const bool self_raised =
      info != nullptr && info->si_code == SI_TKILL && info->si_pid == ::getpid();
  if (wedged != nullptr && self_raised && FromUcxFatalError()) {
    LeaveCore();
    wedged->store(true);  // lock-free: async-signal-safe
    static const char kSaid[] =
        "tierfs: peer transport: UCX failed a check of its own (above) on its progress thread; "
        "that side of this node's peers stops, and is started again if it may be\n";
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kSaid, sizeof kSaid - 1);
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, nullptr);
    for (;;) ::pause();
  }
  // Not UCX's assertion: as if this handler were not there.
  if (g_prior.sa_flags & SA_SIGINFO) {
    g_prior.sa_sigaction(sig, info, context);
  } else if (g_prior.sa_handler == SIG_DFL) {
    ::signal(SIGABRT, SIG_DFL);
    ::raise(SIGABRT);  // delivered when this handler returns: the default action
  } else if (g_prior.sa_handler != SIG_IGN) {
    g_prior.sa_handler(sig);
  }
}

}  // namespace

void Contain() {
  std::call_once(g_once, [] {
    g_fatal[0] = CodeOf("ucs_fatal_error_message");
    g_fatal[1] = CodeOf("ucs_fatal_error_format");
    if (g_fatal[0].end == 0 && g_fatal[1].end == 0) {
      TIERFS_LOG(kWarning,
                 "peer transport: UCX's fatal-error functions not found: a failed "
                 "check in UCX will end the daemon");
    }
    void* warm[4];
    ::backtrace(warm, 4);  // loads libgcc_s now, not in the handler
    struct sigaction sa {};
    sa.sa_sigaction = &OnAbort;
    sa.sa_flags = SA_SIGINFO;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(SIGABRT, &sa, &g_prior);
  });
}

InUcx::InUcx(std::atomic<bool>* wedged) : prev_(t_wedged) { t_wedged = wedged; }
InUcx::~InUcx() { t_wedged = prev_; }

void ReportWedged() {
  static std::atomic<bool> reported{false};
  if (reported.exchange(true)) return;
  static const char kSaid[] =
      "peer transport: UCX failed a check of its own on its progress thread (a core of that "
      "moment is a child's, where cores are kept); that side of this node's peers stops and "
      "reads SOURCE, and is started again if it may be (the next lines say)";
  TIERFS_LOG(kError, "{}", kSaid);
  if (!Log::ToSyslog()) {  // the daemon's log may be a file that goes with the job
    ::openlog("tierfs", LOG_PID, LOG_DAEMON);
    ::syslog(LOG_ERR, "%s", kSaid);
  }
}

}  // namespace tierfs::ucx_abort
