// Checks of a mount's command line made before SOURCE is touched: a mistake
// is reported within a second with exit status 2, not after a scan that may
// take minutes. What a check cannot decide without the scan (a tier held by
// a daemon that is unmounting) is left to the mount.
#pragma once

#include <string>
#include <vector>

#include "fs/config/options.h"
#include "tiering/base/status.h"

namespace tierfs {

// Tier directories (absolute, existing, a directory and not a symbolic link,
// writable; a budget larger than their file system is warned about), modes that need a
// tier, RAM budgets against the machine's memory (refused above MemTotal or
// below 4 KiB; warned above MemAvailable, and when the RAM tier and the
// tiers on tmpfs or ramfs together exceed MemTotal or MemAvailable), the
// index file's directory, a mount with no tier at all (warned: a mirror
// only), and the ro option (warned: the control files cannot be written).
// An error if the command line may not go on; doubtful but allowed settings
// go to *warnings.
Status CheckBeforeScan(const MountConfig& config, std::vector<std::string>* warnings);

}  // namespace tierfs
