// Containing UCX's assertion (ucx_abort.h): only an abort that UCX's
// fatal-error path raised on a thread marked as in a UCX call is parked
// (the thread stops, its worker is flagged, the process goes on); an abort
// from our own code, in a UCX call or not, and a SIGABRT sent by another
// process end the process. Each case runs in a child process, waited for
// a bounded time (a child that parks when it should not is killed, and the
// case fails).
#include "tiering/peers/transport/ucx_abort.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>

// libucs: logs the message, then abort() (UCX's failed assertions end here).
extern "C" void ucs_fatal_error_message(const char* file, unsigned line, const char* function,
                                        char* message_buf);

namespace tierfs {
namespace {

using namespace std::chrono_literals;

// What parent and child share: the worker's flag and "in the UCX call".
struct Shared {
  std::atomic<bool> wedged{false};
  std::atomic<bool> in_ucx{false};
};

Shared* MapShared() {
  void* p =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  return new (p) Shared;
}

// A child running `fn` as the daemon would: SIGABRT's default action (not
// the test runner's handler), no core file.
template <typename F>
pid_t StartChild(F fn) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::signal(SIGABRT, SIG_DFL);
    const struct rlimit none { 0, 0 };
    ::setrlimit(RLIMIT_CORE, &none);
    fn();
    ::_exit(0);
  }
  return pid;
}

// How `pid` ended, if it did within `limit`; else it is killed and reaped.
std::optional<int> WaitBounded(pid_t pid, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(5ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return std::nullopt;
}

bool EndedByAbort(std::optional<int> status) {
  return status && WIFSIGNALED(*status) && WTERMSIG(*status) == SIGABRT;
}

TEST_CASE(
    "ucx abort: UCX's own failed check inside a UCX call wedges its worker, the process "
    "goes on",
    "[peer]") {
  Shared* shared = MapShared();
  const pid_t pid = StartChild([shared] {
    ucx_abort::Contain();
    std::thread([shared] {
      ucx_abort::InUcx in(&shared->wedged);
      char message[] = "Assertion `ep->flags & UCP_EP_FLAG_REMOTE_CONNECTED' failed";
      ucs_fatal_error_message("wireup.c", 1, "ucp_wireup_send_reply", message);
    }).detach();
    for (;;) std::this_thread::sleep_for(10ms);  // the process goes on
  });
  const std::optional<int> status = WaitBounded(pid, 1500ms);
  CHECK_FALSE(status.has_value());  // still alive: killed by the wait
  CHECK(shared->wedged.load());
  ::munmap(shared, sizeof(Shared));
}

TEST_CASE("ucx abort: an abort from our own code inside a UCX call ends the process", "[peer]") {
  Shared* shared = MapShared();
  const pid_t pid = StartChild([shared] {
    ucx_abort::Contain();
    ucx_abort::InUcx in(&shared->wedged);
    std::abort();  // not UCX's fatal-error path: a heap check, our own bug
  });
  CHECK(EndedByAbort(WaitBounded(pid, 5000ms)));
  CHECK_FALSE(shared->wedged.load());
  ::munmap(shared, sizeof(Shared));
}

TEST_CASE("ucx abort: a SIGABRT sent by another process ends the process, in a UCX call too",
          "[peer]") {
  Shared* shared = MapShared();
  const pid_t pid = StartChild([shared] {
    ucx_abort::Contain();
    ucx_abort::InUcx in(&shared->wedged);
    shared->in_ucx.store(true);
    for (;;) ::pause();  // as a thread waiting inside UCX
  });
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (!shared->in_ucx.load() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE(shared->in_ucx.load());
  ::kill(pid, SIGABRT);  // an administrator's kill -ABRT, for a core
  CHECK(EndedByAbort(WaitBounded(pid, 5000ms)));
  CHECK_FALSE(shared->wedged.load());
  ::munmap(shared, sizeof(Shared));
}

TEST_CASE("ucx abort: an abort in our own code still ends the process", "[peer]") {
  SECTION("in a callback UCX made") {
    const pid_t pid = StartChild([] {
      ucx_abort::Contain();
      std::atomic<bool> wedged{false};
      ucx_abort::InUcx in(&wedged);
      ucx_abort::InUcx ours(nullptr);
      std::abort();
    });
    CHECK(EndedByAbort(WaitBounded(pid, 5000ms)));
  }
  SECTION("outside UCX") {
    const pid_t pid = StartChild([] {
      ucx_abort::Contain();
      std::abort();
    });
    CHECK(EndedByAbort(WaitBounded(pid, 5000ms)));
  }
}

}  // namespace
}  // namespace tierfs
