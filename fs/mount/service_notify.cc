#include "fs/mount/service_notify.h"

#include <systemd/sd-daemon.h>

#include "tiering/base/log.h"

namespace tierfs {
namespace {

void Notify(const std::string& state) {
  // 0: keep NOTIFY_SOCKET, so that every later state change is sent too.
  int rc = sd_notify(0, state.c_str());
  if (rc < 0) TIERFS_LOG(kDebug, "sd_notify failed: error {}", -rc);
}

}  // namespace

void NotifyStatus(const std::string& text) { Notify("STATUS=" + text); }

void NotifyReady(const std::string& text) { Notify("READY=1\nSTATUS=" + text); }

void NotifyStopping(const std::string& text) { Notify("STOPPING=1\nSTATUS=" + text); }

}  // namespace tierfs
