// Readiness and status for a service manager (systemd's sd_notify protocol):
// a unit with Type=notify is "started" once the mount is live, not when the
// process starts. Without NOTIFY_SOCKET in the environment (a shell, fstab,
// a mount unit) every call does nothing. Thread-safe.
#pragma once

#include <string>

namespace tierfs {

// STATUS=text: shown by `systemctl status`.
void NotifyStatus(const std::string& text);
// READY=1 and STATUS=text: the kernel shows the mount; requests are served.
void NotifyReady(const std::string& text);
// STOPPING=1 and STATUS=text: shutdown has begun (promotions are finishing).
void NotifyStopping(const std::string& text);

}  // namespace tierfs
