// Checks of a mount's command line made before SOURCE is touched: a mistake
// is reported within a second (exit status 2 for what the command line says
// on its own, 5 for a tier or index path it names that cannot be used now),
// not after a scan that may take minutes. What a check cannot decide without
// the scan (a tier held by a daemon that is unmounting) is left to the mount.
#pragma once

#include <string>
#include <vector>

#include "fs/config/options.h"
#include "tiering/base/status.h"

namespace tierfs {

// What the command line says on its own: tier paths absolute, modes that
// need a tier, RAM budgets against the machine's memory (refused above
// MemTotal or below 4 KiB; warned above MemAvailable, and when the RAM tier
// and the tiers on tmpfs or ramfs together exceed MemTotal or MemAvailable),
// the log= file, a mount with no tier at all (warned: a mirror only), and
// the ro option (warned: the control files cannot be written). An error
// (EINVAL, or the log file's errno) if the command line may not go on;
// doubtful but allowed settings go to *warnings.
Status CheckBeforeScan(const MountConfig& config, std::vector<std::string>* warnings);

// Whether the paths the command line names can be used now: each tier
// directory (existing, a directory and not a symbolic link, writable, not
// held by a live daemon; a budget larger than its file system is warned
// about) and the index file's directory (a file can be made there, tried).
// Call after CheckBeforeScan. An error with the errno of the check that
// failed (ENOENT, ENOTDIR, ELOOP, EACCES, EBUSY, ENOSPC, EDQUOT, EROFS...).
Status CheckNamedPaths(const MountConfig& config, std::vector<std::string>* warnings);

}  // namespace tierfs
