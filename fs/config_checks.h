// Checks of a mount's command line made before SOURCE is touched: a mistake
// is reported within a second with exit status 2, not after a scan that may
// take minutes. What a check cannot decide without the scan (a tier held by
// a daemon that is unmounting) is left to the mount.
#pragma once

#include <string>
#include <vector>

#include "fs/options.h"

namespace tierfs {

struct ConfigCheck {
  std::string error;                  // "" if the command line may go on
  std::vector<std::string> warnings;  // doubtful, but allowed
};

// Tier directories (absolute, existing, a directory and not a symbolic link,
// writable; a budget larger than their file system is warned about), modes that need a
// tier, RAM budgets against the machine's memory (refused above MemTotal or
// below 4 KiB; warned above MemAvailable), and the index file's directory.
ConfigCheck CheckBeforeScan(const MountConfig& config);

}  // namespace tierfs
