// A listening socket handed to the daemon by the process that started it,
// in systemd's socket-activation convention: LISTEN_PID is this process,
// LISTEN_FDS=1, the socket is fd 3. A privileged parent (a root prolog, a
// socket unit) binds the job's peer port before the daemon starts, so no
// other user of the node can take the port first. The mount takes it once,
// before it forks, and hands it to the peer service.
#pragma once

namespace tierfs {

// The socket (fd 3, close-on-exec from now on), or -1 when none was handed
// over for this process. The LISTEN_* variables are removed either way
// they named this process, so no child takes the socket for its own. A fd 3
// that is not a listening IPv4 TCP socket is logged and ignored.
int TakeInheritedListener();

}  // namespace tierfs
