// The fixture of check_thread_safety_test.py: code using tiering/base/mutex.h
// as the daemon does, which tools/check-thread-safety passes, and one broken
// variant per TIERFS_BREAK_* define, each of which it must fail. Never built.
#include "tiering/base/mutex.h"

namespace tierfs {

class Fixture {
 public:
  void Add(int n) {
    {
      MutexLock lock(mu_);
      count_ += n;
      Ready();
    }
    cv_.NotifyAll();
  }

  int Read() const {
#ifdef TIERFS_BREAK_UNLOCKED_READ
    return count_;  // a guarded field read without its lock
#else
    MutexLock lock(mu_);
    return count_;
#endif
  }

  void Reset() {
#ifndef TIERFS_BREAK_UNLOCKED_WRITE
    MutexLock lock(mu_);
#endif
    count_ = 0;
  }

  void WaitPositive() {
    MutexLock lock(mu_);
#ifdef TIERFS_BREAK_UNANNOTATED_PREDICATE
    cv_.Wait(mu_, [this] { return count_ > 0; });
#else
    cv_.Wait(mu_, [this]() REQUIRES(mu_) { return count_ > 0; });
#endif
  }

  void Log() {
#ifdef TIERFS_BREAK_ORDER
    MutexLock log(log_mu_);
    MutexLock lock(mu_);  // against ACQUIRED_BEFORE: mu_ comes first
#else
    MutexLock lock(mu_);
    MutexLock log(log_mu_);
#endif
    lines_++;
  }

  int ReadShared() {
#ifdef TIERFS_BREAK_WRITE_UNDER_READER
    ReaderMutexLock lock(table_mu_);
    return ++table_;  // a write needs the mutex alone
#else
    WriterMutexLock lock(table_mu_);
    return ++table_;
#endif
  }

  void Unlocked() {
    MutexLock lock(mu_);
    lock.Unlock();
#ifdef TIERFS_BREAK_AFTER_UNLOCK
    count_++;  // the scope let go of mu_ above
#endif
    lock.Lock();
    count_++;
  }

 private:
  void Ready() REQUIRES(mu_) { count_ += 0; }

  mutable Mutex mu_ ACQUIRED_BEFORE(log_mu_);
  Mutex log_mu_;
  CondVar cv_;
  int count_ GUARDED_BY(mu_) = 0;
  int lines_ GUARDED_BY(log_mu_) = 0;
  SharedMutex table_mu_;
  int table_ GUARDED_BY(table_mu_) = 0;

#ifdef TIERFS_BREAK_REQUIRES
 public:
  void CallsHelperUnlocked() { Ready(); }
#endif
};

}  // namespace tierfs
