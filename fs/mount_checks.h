// Checks made before mounting, each failing with a message for the user.
#pragma once

#include <string>

#include "tiering/base/status.h"

namespace tierfs {

// Returns ok if `source` is a readable directory, else a message with the
// errno of the check that failed (ENOTDIR: not a directory). Sets *resolved
// to its absolute, symlink-free path.
Status CheckSource(const std::string& source, std::string* resolved);

// Returns ok if `mountpoint` can take the mount, else a message: missing
// (ENOENT), not a directory (ENOTDIR), a stale FUSE mount (ENOTCONN),
// already a mount point (EBUSY), the same as SOURCE (EINVAL), or not empty
// (ENOTEMPTY, unless allow_nonempty). Sets *resolved.
Status CheckMountpoint(const std::string& mountpoint, const std::string& source,
                       bool allow_nonempty, std::string* resolved);

// True if `path` (absolute, resolved) is the mount point of a mounted file system.
bool IsMountPoint(const std::string& path);

}  // namespace tierfs
