// Containing an abort inside UCX (ucx_abort.h): an abort on a thread marked
// as in a UCX call parks that thread and flags its worker, and the process
// goes on; an abort in our own code, UCX's callbacks into it included,
// still ends the process.
#include "tiering/peer/ucx_abort.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace tierfs {
namespace {

using namespace std::chrono_literals;

// Runs `fn` in a child process; how the child ended. The child starts with
// SIGABRT's default action, as the daemon does: the test runner's own
// handler (Catch's, which reports and allocates) is not what Contain()
// hands other aborts to in production.
template <typename F>
int InChild(F fn) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::signal(SIGABRT, SIG_DFL);
    fn();
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

TEST_CASE("ucx abort: an abort inside a UCX call wedges its worker, the process goes on",
          "[peer]") {
  int status = InChild([] {
    ucx_abort::Contain();
    std::atomic<bool> wedged{false};
    std::thread([&] {
      ucx_abort::InUcx in(&wedged);
      std::abort();  // as UCX's failed assertion does
    }).detach();
    auto end = std::chrono::steady_clock::now() + 5s;
    while (!wedged.load() && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(1ms);
    }
    ::_exit(wedged.load() ? 7 : 8);  // alive, and the worker knows
  });
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
}

TEST_CASE("ucx abort: an abort in our own code still ends the process", "[peer]") {
  SECTION("in a callback UCX made") {
    int status = InChild([] {
      ucx_abort::Contain();
      std::atomic<bool> wedged{false};
      ucx_abort::InUcx in(&wedged);
      ucx_abort::InUcx ours(nullptr);
      std::abort();
    });
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGABRT);
  }
  SECTION("outside UCX") {
    int status = InChild([] {
      ucx_abort::Contain();
      std::abort();
    });
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGABRT);
  }
}

}  // namespace
}  // namespace tierfs
