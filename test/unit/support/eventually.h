// Eventually: polls a condition for a while, for tests that wait on threads.
#pragma once

#include <chrono>
#include <thread>

namespace tierfs::testing {

// Polls `done` every millisecond for up to 5 s; returns its last answer.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 5000 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

}  // namespace tierfs::testing
