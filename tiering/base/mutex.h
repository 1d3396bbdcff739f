// The daemon's mutexes, as capabilities clang's thread-safety analysis knows
// (thread_annotations.h): libstdc++'s std::mutex carries no annotations, so
// a field GUARDED_BY a std::mutex could not be checked.
//
//   Mutex mu_;                  int count_ GUARDED_BY(mu_);
//   { MutexLock lock(mu_); ++count_; }
//   { MutexLock lock(mu_); while (!ready_) cv_.Wait(mu_); }
//
// CondVar is a std::condition_variable waiting on a Mutex: it costs what the
// standard one costs (std::condition_variable_any would add a mutex and a
// shared_ptr of its own to every wait and notify), and a wait in a loop over
// guarded fields is checked like any other code. A predicate lambda is
// analysed apart from its caller: say what it needs, [&]() REQUIRES(mu_) {...}.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "tiering/base/thread_annotations.h"

namespace tierfs {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Readers share it, a writer has it alone.
class CAPABILITY("mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a Mutex (or a SharedMutex alone) for its scope; Unlock and Lock let
// a scope let go of it for a while (a wait, a call that must not hold it).
template <typename M>
class SCOPED_CAPABILITY BasicMutexLock {
 public:
  explicit BasicMutexLock(M& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~BasicMutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  BasicMutexLock(const BasicMutexLock&) = delete;
  BasicMutexLock& operator=(const BasicMutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  M& mu_;
  bool held_ = true;
};
using MutexLock = BasicMutexLock<Mutex>;
using WriterMutexLock = BasicMutexLock<SharedMutex>;

// Holds a SharedMutex shared for its scope.
class SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderMutexLock() RELEASE() { mu_.unlock_shared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

// A condition variable whose waits name the Mutex they release and retake.
// Each wait needs `mu` held and returns with it held again.
class CondVar {
 public:
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

  void Wait(Mutex& mu) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  template <typename Predicate>
  void Wait(Mutex& mu, Predicate ready) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    while (!ready()) Wait(mu);
  }
  // False if `deadline` passed first.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    std::cv_status status = cv_.wait_until(lock, deadline);
    lock.release();
    return status == std::cv_status::no_timeout;
  }
  // ready() at the end: false if `deadline` passed with it false.
  template <typename Clock, typename Duration, typename Predicate>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline,
                 Predicate ready) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    while (!ready()) {
      if (!WaitUntil(mu, deadline)) return ready();
    }
    return true;
  }
  // False if `period` passed first (on the steady clock, as std's).
  template <typename Rep, typename Period>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& period) REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + period);
  }
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& period, Predicate ready)
      REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    return WaitUntil(mu, std::chrono::steady_clock::now() + period, std::move(ready));
  }

 private:
  std::condition_variable cv_;
};

}  // namespace tierfs
