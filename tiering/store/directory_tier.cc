// The directory tier's opening: the checks that a directory may be this
// daemon's tier, its lock, data/, and the file system's hole punching. The
// tier itself: journaled_directory_tier.h.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "tiering/base/log.h"
#include "tiering/io/file_io.h"
#include "tiering/store/journaled_directory_tier.h"
#include "tiering/store/tier.h"

namespace tierfs {

using directory_tier::EmptyTierDirectory;
using directory_tier::JournaledDirectoryTier;

std::vector<ChunkKey> DirectoryTier::Recover(const Acceptor& accept) {
  std::vector<ChunkKey> kept;
  Recover(std::string(), accept, &kept);
  return kept;
}

Status UnsafeTierDirectory(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();  // "link/" would follow link
  const uid_t me = ::geteuid();
  auto unsafe = [](std::string why) { return Status::Error(EACCES, std::move(why)); };
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::Error(errno, std::strerror(errno));
  if (S_ISLNK(st.st_mode)) return Status::Error(ELOOP, "it is a symbolic link");
  if (st.st_uid != me)
    return unsafe(fmt::format("it is owned by uid {}, not by this daemon's uid {}", st.st_uid, me));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return unsafe(fmt::format("group or others may write to it (mode {:o})", st.st_mode & 07777));
  std::error_code ec;
  std::filesystem::path dir =
      std::filesystem::canonical(std::filesystem::absolute(path).parent_path(), ec);
  if (ec) return Status::Error(ec.value(), fmt::format("its parent directory: {}", ec.message()));
  for (;; dir = dir.parent_path()) {
    if (::lstat(dir.c_str(), &st) != 0)
      return Status::FromErrno(errno, fmt::format("'{}'", dir.string()));
    if (st.st_uid != 0 && st.st_uid != me)
      return unsafe(fmt::format("'{}' above it is owned by uid {}", dir.string(), st.st_uid));
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
      return unsafe(
          fmt::format("'{}' above it is writable by others without the sticky bit (mode {:o})",
                      dir.string(), st.st_mode & 07777));
    if (dir == dir.root_path()) return Status::Ok();
  }
}

namespace {

// Removing a chunk frees its blocks by punching a hole in its tier file
// (fallocate PUNCH_HOLE): on a file system that cannot, the removed chunks'
// bytes would stay on the device while the budget counted them free, so
// such a tier is refused. Other errors (a full device) refuse nothing: the
// chunks' writes meet them and say so.
Status CanPunchHoles(FileIo* io, const std::string& data) {
  const std::string probe = data + "/punch-probe";
  std::unique_ptr<LocalFile> file;
  int err = io->open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600, &file);
  if (err == 0) {
    const std::string block(4096, 'x');
    err = PwriteAll(file.get(), block.data(), block.size(), 0);
    if (err == 0) err = file->punch_hole(0, block.size());
    file.reset();
    io->unlink(probe);
  }
  if (err != -EOPNOTSUPP) return Status::Ok();
  return Status::Error(EOPNOTSUPP,
                       "its file system cannot punch holes (fallocate PUNCH_HOLE), which the tier "
                       "needs to free the blocks of a removed chunk; use a directory on ext4, "
                       "XFS, btrfs or tmpfs");
}

}  // namespace

Result<std::unique_ptr<DirectoryTier>> OpenDirectoryTier(std::shared_ptr<FileIo> io,
                                                         std::string name, const std::string& given,
                                                         uint64_t budget, bool reset,
                                                         std::chrono::milliseconds lock_wait) {
  // Every later access is by this path, after the daemon has changed its
  // working directory to / (daemonizing): a relative one must not follow.
  std::error_code ec;
  const std::string path = std::filesystem::absolute(given, ec).lexically_normal().string();
  if (ec || path.empty()) {
    return Status::Error(
        ec ? ec.value() : EINVAL,
        fmt::format("tier '{}': cannot make it absolute: {}", given, ec.message()));
  }
  struct stat st;
  if (int err = io->stat(path, &st); err != 0 || !S_ISDIR(st.st_mode)) {
    return Status::Error(err < 0 ? -err : ENOTDIR,
                         fmt::format("tier '{}': not an existing directory", path));
  }
  if (Status why = UnsafeTierDirectory(path); !why.ok()) {
    return why.Context(fmt::format("tier '{}' is refused", path));
  }
  if (int err = io->access(path, W_OK | X_OK); err < 0) {
    return Status::FromErrno(-err, fmt::format("tier '{}': not writable", path));
  }
  std::unique_ptr<FileLock> lock;
  const auto give_up = std::chrono::steady_clock::now() + lock_wait;
  int err = io->lock(path + "/lock", &lock);
  if (err == -EWOULDBLOCK && lock_wait.count() > 0) {
    TIERFS_LOG(kInfo, "tier '{}' is in use by another tierfs daemon: waiting up to {} s", path,
               lock_wait.count() / 1000.0);
    while (err == -EWOULDBLOCK && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      err = io->lock(path + "/lock", &lock);
    }
  }
  if (err == -EWOULDBLOCK) {
    return Status::Error(EBUSY, fmt::format("tier '{}' is in use by another tierfs daemon", path));
  }
  if (err < 0) {
    return Status::FromErrno(-err, fmt::format("tier '{}': cannot create its lock file", path));
  }
  // Replaced by the mount's pid and mount point once it serves (Engine).
  lock->Note(fmt::format("pid={}\nstate=starting\n", ::getpid()));
  if (reset) EmptyTierDirectory(io.get(), path);
  // data/ is the daemon's alone, whatever the umask: in a directory others
  // may write to, they could swap a tier file for theirs.
  const std::string data = path + "/data";
  err = io->mkdir(data, 0700);
  if (err == -EEXIST) {
    struct stat dst;
    if (::lstat(data.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode) || dst.st_uid != ::geteuid()) {
      return Status::Error(
          EACCES, fmt::format("tier '{}': data/ is not a directory of this daemon's uid", path));
    }
    err = 0;
    if ((dst.st_mode & 077) != 0) {  // an older tierfs made it with the umask's mode
      const uint64_t removed = EmptyTierDirectory(io.get(), path);
      TIERFS_LOG(kWarning, "tier '{}': data/ was open to others (mode {:o}): {} copies removed",
                 path, dst.st_mode & 07777, removed);
      err = io->chmod(data, 0700);
    }
  }
  if (err < 0) return Status::FromErrno(-err, fmt::format("tier '{}': cannot create data/", path));
  if (Status why = CanPunchHoles(io.get(), data); !why.ok()) {
    return why.Context(fmt::format("tier '{}' is refused", path));
  }
  return std::unique_ptr<DirectoryTier>(std::make_unique<JournaledDirectoryTier>(
      std::move(io), std::move(name), path, budget, std::move(lock),
      directory_tier::TierFilesKeptOpen()));
}

Result<std::unique_ptr<DirectoryTier>> OpenDirectoryTier(std::string name, const std::string& path,
                                                         uint64_t budget, bool reset,
                                                         std::chrono::milliseconds lock_wait) {
  return OpenDirectoryTier(NewPosixFileIo(), std::move(name), path, budget, reset, lock_wait);
}

}  // namespace tierfs
