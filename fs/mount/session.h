// The mount session: validates SOURCE and MOUNTPOINT, scans the namespace,
// mounts, detaches unless foreground, serves until unmounted or signalled,
// and unmounts. Errors before the mount leave nothing mounted.
#pragma once

#include "fs/config/options.h"

namespace tierfs {

// Runs a mount to completion. Returns the process exit status: 0 after a
// clean unmount, 1 with a message on stderr when the mount cannot be made.
int RunMount(const MountConfig& config);

}  // namespace tierfs
