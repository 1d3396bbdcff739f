// Checks made before mounting, each failing with a message for the user.
#pragma once

#include <string>

namespace tierfs {

// Returns "" if `source` is a readable directory, else a message. Sets
// *resolved to its absolute, symlink-free path.
std::string CheckSource(const std::string& source, std::string* resolved);

// Returns "" if `mountpoint` can take the mount, else a message: missing,
// not a directory, a stale FUSE mount, already a mount point, the same as
// SOURCE, or not empty (unless allow_nonempty). Sets *resolved.
std::string CheckMountpoint(const std::string& mountpoint, const std::string& source,
                            bool allow_nonempty, std::string* resolved);

// True if `path` (absolute, resolved) is the mount point of a mounted file system.
bool IsMountPoint(const std::string& path);

}  // namespace tierfs
