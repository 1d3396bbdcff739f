// FsCredentials: this thread's file-system credentials (fsuid, fsgid and
// supplementary groups) switched to another user's for the object's
// lifetime, then restored.
//
// Every change of credentials makes the kernel reset the process's
// dumpable flag to the sysctl fs.suid_dumpable, which may be 2: a core of a
// root daemon would then hold other users' bytes, and a daemon that was not
// ptrace-able by its user would be for a moment. So after each switch,
// there and back, the process is set not dumpable again (PR_SET_DUMPABLE
// 0): while one lives and after it, the process stays not dumpable. Every
// credential switch of the daemon goes through here.
//
// The groups are set with the setgroups system call, which changes this
// thread only (glibc's wrapper changes every thread). Restoring cannot fail
// for a root daemon; if it does, this thread would go on with a user's
// credentials: the destructor aborts instead.
#pragma once

#include <sys/types.h>

#include <vector>

#include "tiering/base/status.h"

namespace tierfs {

class FsCredentials {
 public:
  // Switches to `uid`, `gid` and `groups`; status() says whether it is done
  // (EPERM: this process may not, a daemon that is not root).
  FsCredentials(uid_t uid, gid_t gid, const std::vector<gid_t>& groups);
  ~FsCredentials();
  FsCredentials(const FsCredentials&) = delete;
  FsCredentials& operator=(const FsCredentials&) = delete;

  const Status& status() const { return status_; }

  // Sets the process not dumpable; false (errno set) if the kernel refused.
  static bool KeepUndumpable();

 private:
  Status status_;
  std::vector<gid_t> saved_groups_;
  uid_t saved_uid_ = 0;
  gid_t saved_gid_ = 0;
  bool switched_ = false;  // groups or ids changed: the destructor restores
};

}  // namespace tierfs
