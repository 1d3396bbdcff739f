#include "tiering/io/fs_credentials.h"

#include <fmt/format.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace tierfs {
namespace {

uid_t FsUid() { return static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))); }
gid_t FsGid() { return static_cast<gid_t>(::setfsgid(static_cast<gid_t>(-1))); }

// This thread's supplementary groups, by the system call (glibc's setgroups
// would change every thread's).
int SetThreadGroups(const std::vector<gid_t>& groups) {
  return ::syscall(SYS_setgroups, groups.size(), groups.data()) == 0 ? 0 : -errno;
}

}  // namespace

bool FsCredentials::KeepUndumpable() { return ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0; }

FsCredentials::FsCredentials(uid_t uid, gid_t gid, const std::vector<gid_t>& groups) {
  const int n = ::getgroups(0, nullptr);
  if (n < 0) {
    status_ = Status::FromErrno(errno, "getgroups");
    return;
  }
  saved_groups_.resize(static_cast<size_t>(n));
  if (n > 0 && ::getgroups(n, saved_groups_.data()) != n) {
    status_ = Status::FromErrno(errno, "getgroups");
    return;
  }
  saved_uid_ = FsUid();
  saved_gid_ = FsGid();
  if (int err = SetThreadGroups(groups); err != 0) {
    status_ = Status::FromErrno(-err, "setgroups");
    return;
  }
  switched_ = true;
  ::setfsgid(gid);
  ::setfsuid(uid);
  KeepUndumpable();
  if (FsGid() != gid || FsUid() != uid) {
    status_ = Status::Error(
        EPERM, fmt::format("cannot take uid {} gid {} (setfsuid, setfsgid)", uid, gid));
  }
}

FsCredentials::~FsCredentials() {
  if (!switched_) return;
  ::setfsuid(saved_uid_);
  ::setfsgid(saved_gid_);
  KeepUndumpable();
  if (SetThreadGroups(saved_groups_) != 0 || FsUid() != saved_uid_ || FsGid() != saved_gid_) {
    std::fputs("tierfs: cannot take back its own file-system credentials\n", stderr);
    std::abort();  // this thread would go on with a caller's credentials
  }
}

}  // namespace tierfs
