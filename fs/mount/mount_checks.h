// Checks made before mounting, each failing with a message for the user.
#pragma once

#include <dirent.h>

#include <string>
#include <vector>

#include "tiering/base/status.h"

namespace tierfs {

// Returns ok if `source` is a readable directory, else a message with the
// errno of the check that failed (ENOTDIR: not a directory). Sets *resolved
// to its absolute, symlink-free path.
Status CheckSource(const std::string& source, std::string* resolved);

// True if `source` is `mountpoint` or lies beneath it (both absolute and
// resolved); beneath "/" does not count (mounting there is MOUNTPOINT's
// failure).
bool SourceWithin(const std::string& source, const std::string& mountpoint);

// Returns ok unless `source` (resolved) is `mountpoint` once resolved, or
// inside it (EINVAL, a message naming SOURCE): SOURCE's path led there, so
// it is SOURCE's failure. Ok too if `mountpoint` cannot be resolved
// (CheckMountpoint says why).
Status CheckSourceApart(const std::string& source, const std::string& mountpoint);

// Returns ok if `mountpoint` can take the mount, else a message: missing
// (ENOENT), not a directory (ENOTDIR), a stale FUSE mount (ENOTCONN),
// already a mount point (EBUSY), or not empty (ENOTEMPTY, unless
// allow_nonempty). Sets *resolved. SOURCE is checked apart from it by
// CheckSourceApart.
Status CheckMountpoint(const std::string& mountpoint, bool allow_nonempty, std::string* resolved);

// True if `path` (absolute, resolved) is the mount point of a mounted file system.
bool IsMountPoint(const std::string& path);

// True if the open directory `dir` holds nothing but "." and ".."; closes it.
bool EmptyDirectory(DIR* dir);

// Returns ok if the FUSE mount itself can be made on `mountpoint` (resolved)
// by this process with `fuse_options` (the -o words handed to libfuse), else
// every reason it cannot, one a line, each saying the fix: /dev/fuse missing
// or not readable and writable; for a user other than root, fusermount3
// missing or not set-uid root, a mount point the user may not write or
// (sticky) does not own, and allow_other or allow_root without
// user_allow_other in `fuse_conf`. What fusermount3 refuses, said before the
// scan rather than after it. The code says whose it is to fix: ENODEV this
// machine's setup (the device, fusermount3), else EACCES the mount point,
// else EPERM an option the machine does not permit.
Status CheckFuseMount(const std::string& mountpoint, const std::vector<std::string>& fuse_options,
                      const std::string& fuse_conf = "/etc/fuse.conf");

}  // namespace tierfs
