// The mount session: validates SOURCE and MOUNTPOINT, scans the namespace,
// mounts, detaches unless foreground, serves until unmounted or signalled,
// and unmounts. Errors before the mount leave nothing mounted.
#pragma once

#include "fs/config/options.h"

namespace tierfs {

// Runs a mount to completion: makes it, then serves it. Returns the process
// exit status (ExitStatus, fs/mount/mount_failure.h): 0 after a clean unmount;
// else, with a message on stderr, whose failure it was: 1 this machine's,
// 2 the command line's, 3 SOURCE's, 4 MOUNTPOINT's.
int RunMount(const MountConfig& config);

}  // namespace tierfs
