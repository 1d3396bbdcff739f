// SOURCE and MOUNTPOINT resolved once, with a user's permissions, by a root
// daemon that mounts for that user (-o open_as=UID:GID; the Slurm prolog's
// root daemon for a job). The daemon then works from the directories opened
// here (as /proc/self/fd/N): a path component the user swaps for a symlink
// afterwards changes nothing, and nothing that user could not reach is
// mounted, nor mounted over.
#pragma once

#include <sys/types.h>

#include <string>

#include "tiering/base/status.h"

namespace tierfs {

// Which part of OpenAs failed.
enum class OpenAsFailure { kNone, kCredentials, kSource, kMountpoint };

class OpenedAs {
 public:
  OpenedAs() = default;
  OpenedAs(const OpenedAs&) = delete;
  OpenedAs& operator=(const OpenedAs&) = delete;
  ~OpenedAs();

  bool active() const { return source_fd_ >= 0; }
  // SOURCE, to be opened again through its descriptor (no path walk).
  std::string source_path() const;
  // MOUNTPOINT itself, for mount(2): the directory that was opened.
  std::string mount_path() const;
  // MOUNTPOINT as a name in its parent directory (that was opened): what
  // is mounted there, for looking at or unmounting the mount.
  std::string mounted_path() const;
  // Where the kernel says the two are, for messages.
  const std::string& source_shown() const { return source_shown_; }
  const std::string& mount_shown() const { return mount_shown_; }

  // Returns ok unless SOURCE is MOUNTPOINT (the same directory) or inside
  // it (EINVAL, a message naming SOURCE: its failure). As CheckSourceApart,
  // on the opened directories.
  Status CheckSourceApart() const;

  // Returns ok if MOUNTPOINT can take the mount: not a mount point already
  // (EBUSY), empty unless allow_nonempty (ENOTEMPTY). As CheckMountpoint,
  // on the opened directory.
  Status CheckMountpoint(bool allow_nonempty) const;

  // Unmounts what is mounted on MOUNTPOINT (lazily, following no symlink
  // in its name), unless the FUSE session `fuse_fd` is gone already (the
  // mount was taken down from outside). libfuse cannot: it would unmount
  // mount_path(), which is not a mount point. True if nothing is left for
  // libfuse to unmount.
  bool Unmount(int fuse_fd) const;

 private:
  friend Status OpenAs(uid_t, gid_t, const std::string&, const std::string&, OpenedAs*,
                       OpenAsFailure*);
  int source_fd_ = -1;        // O_RDONLY | O_DIRECTORY
  int mount_parent_fd_ = -1;  // O_PATH | O_DIRECTORY
  int mount_fd_ = -1;         // O_PATH | O_DIRECTORY, the leaf of mount_parent_fd_
  std::string mount_leaf_;
  std::string source_shown_, mount_shown_;
};

// Opens `source` (a directory uid may read and search) and `mountpoint` (a
// directory, not a symlink, that uid may reach) with uid's file-system
// credentials: fsuid uid, fsgid gid, and uid's supplementary groups (none
// but gid if uid has no passwd entry), so every directory on their paths
// must grant uid search permission. Needs root (CAP_SETUID, CAP_SETGID);
// restores the caller's credentials before returning. On failure, *failed
// says what failed.
Status OpenAs(uid_t uid, gid_t gid, const std::string& source, const std::string& mountpoint,
              OpenedAs* out, OpenAsFailure* failed);

}  // namespace tierfs
