#include "fs/mount/fuse_session.h"

#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace tierfs {
namespace {

// fuse_session_mount(), with what libfuse and fusermount3 print meanwhile
// kept in *said (trimmed; several lines indented) instead of on stderr; on
// success it is passed on to stderr. A memory file, not a pipe: fusermount3
// with auto_unmount outlives the mount and keeps its stderr.
int MountSaying(fuse_session* se, const std::string& mountpoint, std::string* said) {
  said->clear();
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  const int capture = ::memfd_create("tierfs-mount-messages", MFD_CLOEXEC);
  if (saved < 0 || capture < 0 || ::dup2(capture, STDERR_FILENO) < 0) {
    if (saved >= 0) ::close(saved);
    if (capture >= 0) ::close(capture);
    return fuse_session_mount(se, mountpoint.c_str());
  }
  const int rc = fuse_session_mount(se, mountpoint.c_str());
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  char buf[4096];
  for (ssize_t n; (n = ::pread(capture, buf, sizeof(buf), static_cast<off_t>(said->size()))) > 0;) {
    said->append(buf, static_cast<size_t>(n));
  }
  ::close(capture);
  if (rc == 0) {
    if (!said->empty()) std::fwrite(said->data(), 1, said->size(), stderr);
    return rc;
  }
  while (!said->empty() && std::isspace(static_cast<unsigned char>(said->back()))) said->pop_back();
  for (size_t at = said->find('\n'); at != std::string::npos; at = said->find('\n', at + 3)) {
    said->replace(at, 1, "\n  ");
  }
  return rc;
}

}  // namespace

Result<std::unique_ptr<FuseSession>> FuseSession::Create(const std::string& options, bool debug,
                                                         const fuse_lowlevel_ops& ops,
                                                         void* userdata) {
  std::vector<std::string> argv_s = {"tierfs", "-o", options};
  if (debug) argv_s.push_back("-d");
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  struct fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  struct fuse_session* se = fuse_session_new(&args, &ops, sizeof(fuse_lowlevel_ops), userdata);
  fuse_opt_free_args(&args);
  if (se == nullptr) {
    return Status::Error(EIO, "cannot create the FUSE session (see the message above)");
  }
  std::unique_ptr<FuseSession> session(new FuseSession(se));
  if (fuse_set_signal_handlers(se) != 0) {
    return Status::Error(EIO, "cannot install signal handlers");
  }
  session->handlers_ = true;
  return session;
}

FuseSession::~FuseSession() {
  if (mounted_ && (!unmount_ || !unmount_(fuse_session_fd(se_)))) fuse_session_unmount(se_);
  RemoveSignalHandlers();
  fuse_session_destroy(se_);
}

Status FuseSession::Mount(const std::string& path) {
  std::string said;
  if (MountSaying(se_, path, &said) != 0) return Status::Error(EIO, said);
  mounted_ = true;
  return Status::Ok();
}

void FuseSession::AnswerInit() {
  struct pollfd pfd = {fuse_session_fd(se_), POLLIN, 0};
  if (::poll(&pfd, 1, 5000) != 1 || (pfd.revents & POLLIN) == 0) return;
  struct fuse_buf buf {};
  int n = fuse_session_receive_buf(se_, &buf);
  if (n > 0) fuse_session_process_buf(se_, &buf);
  std::free(buf.mem);
}

int FuseSession::Loop(unsigned threads) {
  struct fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, threads);
  fuse_loop_cfg_set_idle_threads(loop, std::min(threads, 16u));
  fuse_loop_cfg_set_clone_fd(loop, 1);
  const int rc = fuse_session_loop_mt(se_, loop);
  fuse_loop_cfg_destroy(loop);
  return rc;
}

void FuseSession::RemoveSignalHandlers() {
  if (handlers_) fuse_remove_signal_handlers(se_);
  handlers_ = false;
}

}  // namespace tierfs
