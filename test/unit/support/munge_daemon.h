// MungeDaemon: a munged of the tests' own, with a fresh key and its socket,
// pid, log and seed files in a temporary directory; started on first use,
// stopped when the test program exits. Peer tests that need credentials
// skip (with the reason) unless MungedRunning(). CredentialAs makes one as
// another user.
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tiering/peers/secure/peer_auth.h"

namespace tierfs::testing {

class MungeDaemon {
 public:
  // The running daemon, or nullptr when munged is missing or would not start.
  static MungeDaemon* Get() {
    static std::unique_ptr<MungeDaemon> daemon = Start();
    return daemon.get();
  }
  // Why Get() is null.
  static std::string& why() {
    static std::string reason;
    return reason;
  }

  const std::string& socket() const { return socket_; }

  ~MungeDaemon() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    [[maybe_unused]] int rc = std::system(fmt::format("rm -rf {}", dir_).c_str());
  }

 private:
  static std::unique_ptr<MungeDaemon> Start() {
    std::string munged;
    for (const char* p : {"/usr/sbin/munged", "/usr/bin/munged", "/sbin/munged"}) {
      if (::access(p, X_OK) == 0) {
        munged = p;
        break;
      }
    }
    if (munged.empty()) {
      why() = "munged is not installed (Debian: munge)";
      return nullptr;
    }
    char tmpl[] = "/tmp/tierfs-munge-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      why() = "mkdtemp failed";
      return nullptr;
    }
    auto d = std::unique_ptr<MungeDaemon>(new MungeDaemon);
    d->dir_ = tmpl;
    d->socket_ = d->dir_ + "/socket";
    // munged wants its socket's directory searchable by all, the key readable by it alone.
    ::chmod(tmpl, 0755);
    std::string key = d->dir_ + "/key";
    int rc = std::system(
        fmt::format("dd if=/dev/urandom of={} bs=1024 count=1 status=none", key).c_str());
    if (rc != 0 || ::chmod(key.c_str(), 0400) != 0) {
      why() = "cannot write a key";
      return nullptr;
    }
    // In the foreground, as our child, killed with us: a test program that
    // crashes leaves no munged behind.
    std::vector<std::string> args = {munged,
                                     "--foreground",
                                     "--socket=" + d->socket_,
                                     "--key-file=" + key,
                                     "--pid-file=" + d->dir_ + "/pid",
                                     "--log-file=" + d->dir_ + "/log",
                                     "--seed-file=" + d->dir_ + "/seed"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t parent = ::getpid();
    d->pid_ = ::fork();
    if (d->pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);
      int null = ::open("/dev/null", O_RDWR);  // it logs to its file, not our output
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 500 && d->pid_ > 0; ++i) {  // up to 5 s for its socket
      if (Listening(d->socket_)) return d;
      if (::waitpid(d->pid_, nullptr, WNOHANG) == d->pid_) d->pid_ = -1;
      ::usleep(10000);
    }
    std::ifstream log(d->dir_ + "/log");
    std::stringstream text;
    text << log.rdbuf();
    why() = "munged would not start: " + text.str();
    return nullptr;
  }
  MungeDaemon() = default;
  static bool Listening(const std::string& path) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    path.copy(a.sun_path, sizeof a.sun_path - 1);
    bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (fd >= 0) ::close(fd);
    return ok;
  }

  std::string dir_, socket_;
  pid_t pid_ = -1;
};

// True if the tests' munged runs; else says why the test is skipped.
inline bool MungedRunning() {
  if (MungeDaemon::Get() != nullptr) return true;
  WARN("skipped: " << MungeDaemon::why());
  return false;
}

// A credential carrying `claim`, made by user `uid` (a child process that
// becomes it; root only) for root to decode.
inline std::string CredentialAs(uid_t uid, const PeerClaim& claim) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    if (::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(2);
    PeerAuth as(PeerIdentity{claim.job, claim.from, 0, 0}, MungeDaemon::Get()->socket());
    Result<std::string> cred = as.Make(claim);
    if (!cred.ok()) ::_exit(3);
    ssize_t n = ::write(fds[1], cred->data(), cred->size());
    ::_exit(n == static_cast<ssize_t>(cred->size()) ? 0 : 4);
  }
  ::close(fds[1]);
  std::string cred;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) cred.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  return cred;
}

}  // namespace tierfs::testing
