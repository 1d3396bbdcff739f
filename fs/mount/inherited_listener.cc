#include "fs/mount/inherited_listener.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "tiering/base/log.h"

namespace tierfs {

int TakeInheritedListener() {
  const char* pid = std::getenv("LISTEN_PID");
  const char* fds = std::getenv("LISTEN_FDS");
  if (pid == nullptr || fds == nullptr || std::to_string(::getpid()) != pid ||
      std::string_view(fds) != "1") {
    return -1;
  }
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  constexpr int kFd = 3;
  int accepting = 0, type = 0;
  socklen_t len = sizeof accepting;
  sockaddr_storage addr{};
  socklen_t alen = sizeof addr;
  if (::getsockopt(kFd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting ||
      ::getsockopt(kFd, SOL_SOCKET, SO_TYPE, &type, &(len = sizeof type)) != 0 ||
      type != SOCK_STREAM || ::getsockname(kFd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0 ||
      addr.ss_family != AF_INET) {
    TIERFS_LOG(kWarning, "LISTEN_FDS: fd 3 is not a listening IPv4 TCP socket; ignored");
    return -1;
  }
  ::fcntl(kFd, F_SETFD, FD_CLOEXEC);
  return kFd;
}

}  // namespace tierfs
