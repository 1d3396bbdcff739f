// Executor: lane priority, bounded lanes, Start, Shutdown.
#include "tiering/base/executor.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "eventually.h"

namespace tierfs {
namespace {

using Lane = Executor::Lane;
using testing::Eventually;
using namespace std::chrono_literals;

// The ids of this process's threads (/proc/self/task). A thread is listed
// from the moment it is created, so an executor that started one is seen at
// once, however slowly its jobs would run.
std::set<std::string> ProcessThreads() {
  std::set<std::string> ids;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    ids.insert(task.path().filename());
  }
  return ids;
}

// The threads started since `before` was taken (one that ended since, such
// as another test's thread after its join, is not counted).
size_t ThreadsStartedSince(const std::set<std::string>& before) {
  size_t n = 0;
  for (const std::string& id : ProcessThreads()) n += before.count(id) == 0 ? 1 : 0;
  return n;
}

// Records the names of the jobs that ran, in order, and of those destroyed
// without running (dropped: what a job captures is its cleanup).
class Journal {
 public:
  Executor::Job Job(std::string name) {
    auto token = std::make_shared<Token>(this, std::move(name));
    return Executor::Job{[this, token] {
      std::lock_guard lock(mu_);
      ran_.push_back(token->name);
      token->ran = true;
    }};
  }
  std::vector<std::string> ran() const {
    std::lock_guard lock(mu_);
    return ran_;
  }
  std::vector<std::string> cancelled() const {
    std::lock_guard lock(mu_);
    return cancelled_;
  }

 private:
  struct Token {
    Token(Journal* j, std::string n) : journal(j), name(std::move(n)) {}
    ~Token() {
      if (ran) return;
      std::lock_guard lock(journal->mu_);
      journal->cancelled_.push_back(name);
    }
    Journal* journal;
    std::string name;
    bool ran = false;  // written under mu_ by the job; read by the last owner
  };
  mutable std::mutex mu_;  // guards both lists
  std::vector<std::string> ran_, cancelled_;
};

TEST_CASE("Executor runs foreground jobs before queued background ones", "[executor]") {
  Journal journal;  // outlives the executor, whose threads write to it
  Executor executor(1, 16);
  std::promise<void> open_gate;
  std::shared_future<void> gate = open_gate.get_future().share();
  std::atomic<bool> gate_running{false};
  REQUIRE(executor.Submit(Lane::kBackground, Executor::Job{[&] {
                            gate_running = true;
                            gate.wait();
                          }}));
  executor.Start();
  REQUIRE(Eventually([&] { return gate_running.load(); }));  // the one thread is busy
  REQUIRE(executor.Submit(Lane::kBackground, journal.Job("b1")));
  REQUIRE(executor.Submit(Lane::kForeground, journal.Job("f1")));
  REQUIRE(executor.Submit(Lane::kBackground, journal.Job("b2")));
  REQUIRE(executor.Submit(Lane::kForeground, journal.Job("f2")));
  CHECK(executor.queued(Lane::kForeground) == 2);
  CHECK(executor.queued(Lane::kBackground) == 2);
  CHECK(executor.running() == 1);
  open_gate.set_value();
  REQUIRE(Eventually([&] { return executor.completed() == 5; }));
  CHECK(journal.ran() == std::vector<std::string>{"f1", "f2", "b1", "b2"});
  CHECK(executor.running() == 0);
}

TEST_CASE("Executor runs a job submitted first ahead of its lane's queued jobs", "[executor]") {
  Journal journal;  // outlives the executor, whose threads write to it
  Executor executor(1, 16);
  std::promise<void> open_gate;
  std::shared_future<void> gate = open_gate.get_future().share();
  std::atomic<bool> gate_running{false};
  REQUIRE(executor.Submit(Lane::kForeground, Executor::Job{[&] {
                            gate_running = true;
                            gate.wait();
                          }}));
  executor.Start();
  REQUIRE(Eventually([&] { return gate_running.load(); }));  // the one thread is busy
  REQUIRE(executor.Submit(Lane::kForeground, journal.Job("f1")));
  REQUIRE(executor.Submit(Lane::kForeground, journal.Job("f2")));
  REQUIRE(executor.Submit(Lane::kForeground, journal.Job("first"), Executor::Place::kFirst));
  REQUIRE(executor.Submit(Lane::kForeground, journal.Job("f3")));
  open_gate.set_value();
  REQUIRE(Eventually([&] { return executor.completed() == 5; }));
  CHECK(journal.ran() == std::vector<std::string>{"first", "f1", "f2", "f3"});
}

TEST_CASE("Executor rejects and counts jobs beyond a lane's capacity", "[executor]") {
  Journal journal;  // outlives the executor, whose threads write to it
  Executor executor(1, 2);
  CHECK(executor.capacity() == 2);
  CHECK(executor.Submit(Lane::kForeground, journal.Job("f1")));
  CHECK(executor.Submit(Lane::kForeground, journal.Job("f2")));
  CHECK_FALSE(executor.Submit(Lane::kForeground, journal.Job("f3")));
  CHECK(executor.rejected() == 1);
  // The other lane has its own room.
  CHECK(executor.Submit(Lane::kBackground, journal.Job("b1")));
  CHECK(executor.Submit(Lane::kBackground, journal.Job("b2")));
  CHECK_FALSE(executor.Submit(Lane::kBackground, journal.Job("b3")));
  CHECK(executor.rejected() == 2);
  CHECK(executor.queued(Lane::kForeground) == 2);
  CHECK(executor.queued(Lane::kBackground) == 2);
  executor.Start();
  REQUIRE(Eventually([&] { return executor.completed() == 4; }));
  CHECK(journal.ran() ==
        std::vector<std::string>{"f1", "f2", "b1", "b2"});       // the rejected never run
  CHECK(executor.Submit(Lane::kForeground, journal.Job("f4")));  // room again
  REQUIRE(Eventually([&] { return executor.completed() == 5; }));
}

TEST_CASE("Executor runs jobs submitted before Start only after Start", "[executor]") {
  Journal journal;  // outlives the executor, whose threads write to it
  const auto before = ProcessThreads();
  Executor executor(2, 8);
  for (int i = 0; i < 3; ++i) REQUIRE(executor.Submit(Lane::kBackground, journal.Job("j")));
  // A job runs only on a worker thread, and none exists yet: none can run.
  CHECK(ThreadsStartedSince(before) == 0);
  CHECK(journal.ran().empty());
  CHECK(executor.completed() == 0);
  executor.Start();
  executor.Start();  // a second Start adds no threads
  REQUIRE(Eventually([&] { return executor.completed() == 3; }));
  CHECK(journal.ran().size() == 3);
  CHECK(journal.cancelled().empty());
}

TEST_CASE("Executor Shutdown cancels queued jobs and waits for running ones", "[executor]") {
  Journal journal;  // outlives the executor, whose threads write to it
  Executor executor(1, 8);
  std::atomic<bool> started{false}, saw_stopping{false}, finished{false};
  REQUIRE(executor.Submit(Lane::kForeground, Executor::Job{[&] {
                            started = true;
                            // A long job polls stopping() to give up
                            // early.
                            while (!executor.stopping()) std::this_thread::sleep_for(1ms);
                            saw_stopping = true;
                            std::this_thread::sleep_for(30ms);  // Shutdown must wait for this
                            finished = true;
                          }}));
  executor.Start();
  REQUIRE(Eventually([&] { return started.load(); }));
  REQUIRE(executor.Submit(Lane::kForeground, journal.Job("f")));
  REQUIRE(executor.Submit(Lane::kBackground, journal.Job("b")));
  CHECK_FALSE(executor.stopping());
  executor.Shutdown();
  CHECK(saw_stopping.load());
  CHECK(finished.load());
  CHECK(journal.ran().empty());
  CHECK(journal.cancelled().size() == 2);
  CHECK(executor.queued(Lane::kForeground) == 0);
  CHECK(executor.queued(Lane::kBackground) == 0);
  CHECK_FALSE(executor.Submit(Lane::kForeground, journal.Job("late")));
  CHECK(journal.cancelled().size() == 3);  // a refused job is destroyed unrun too
  executor.Shutdown();                     // again: nothing to do
}

TEST_CASE("Executor Shutdown before Start cancels everything queued", "[executor]") {
  Journal journal;
  {
    Executor executor(4, 8);
    REQUIRE(executor.Submit(Lane::kForeground, journal.Job("f")));
    REQUIRE(executor.Submit(Lane::kBackground, journal.Job("b")));
    const auto before = ProcessThreads();
    executor.Shutdown();
    executor.Start();  // too late: no thread starts, so no job can run
    CHECK(ThreadsStartedSince(before) == 0);
  }  // the destructor does not hang
  CHECK(journal.ran().empty());
  CHECK(journal.cancelled() == std::vector<std::string>{"f", "b"});
}

TEST_CASE("Executor destructor cancels queued jobs", "[executor]") {
  Journal journal;
  {
    Executor executor(1, 8);
    REQUIRE(executor.Submit(Lane::kBackground, journal.Job("b")));
  }
  CHECK(journal.cancelled() == std::vector<std::string>{"b"});
}

}  // namespace
}  // namespace tierfs

namespace tierfs {
namespace {

TEST_CASE("TaskPool runs jobs with no Start, refuses past its queue, drops the queued at Shutdown",
          "[executor]") {
  TaskPool pool(1, 2, "test");
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  REQUIRE(pool.Submit([&] {
    started.set_value();
    released.wait();
  }));
  REQUIRE(started.get_future().wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  // The one thread is busy: two wait in the queue, a third is refused.
  auto owned = std::make_shared<int>(0);
  std::atomic<int> ran{0};
  CHECK(pool.Submit([owned, &ran] { ran++; }));
  CHECK(pool.Submit([owned, &ran] { ran++; }));
  CHECK_FALSE(pool.Submit([owned, &ran] { ran++; }));
  CHECK(owned.use_count() == 3);
  std::thread stopper([&] { pool.Shutdown(); });
  // Shutdown drops the queued jobs (what they own is released) and waits for the running one.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (owned.use_count() > 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(owned.use_count() == 1);
  release.set_value();
  stopper.join();
  CHECK(ran == 0);
  CHECK_FALSE(pool.Submit([] {}));
}

}  // namespace
}  // namespace tierfs
