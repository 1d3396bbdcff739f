// Where a mount's daemon logs once it detaches from the terminal.
#pragma once

#include <string>

namespace tierfs {

// Sends the log where -o log= (`log_to`) says, or to syslog, or (no syslog
// here) to a file named after `mountpoint` whose path is said on stderr
// before the daemon detaches: /var/log/tierfs/ for root,
// ~/.local/state/tierfs/ (or $XDG_STATE_HOME/tierfs/) for a user.
void UseDetachedLog(const std::string& log_to, const std::string& mountpoint);

}  // namespace tierfs
