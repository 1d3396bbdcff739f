// Why a mount could not be made, and whose it is to fix. The exit status
// says whose (the Slurm prolog acts on it: a job's SOURCE or MOUNTPOINT is
// not the node's failure), and ExitStatus is the one place that chooses it.
#pragma once

#include <cerrno>
#include <string>

#include "tiering/base/status.h"

namespace tierfs {

enum class Blame {
  kNone,         // exit 0: mounted, served and unmounted cleanly
  kMachine,      // exit 1: this machine (FUSE, memory, tiers, limits, a failed loop)
  kCommandLine,  // exit 2: what the command line says on its own (syntax, combinations, sizes)
  kSource,       // exit 3: SOURCE (its path, permissions, contents), its owner's to fix
  kMountpoint,   // exit 4: MOUNTPOINT, its owner's to fix
  kPath,         // exit 5: a tier or index path the command line names cannot be used
  kSourceIo,     // exit 6: SOURCE's file system fails (I/O errors, timeouts, stale mount)
};

// The process exit status for `blame`.
constexpr int ExitStatus(Blame blame) {
  switch (blame) {
    case Blame::kNone:
      return 0;
    case Blame::kMachine:
      return 1;
    case Blame::kCommandLine:
      return 2;
    case Blame::kSource:
      return 3;
    case Blame::kMountpoint:
      return 4;
    case Blame::kPath:
      return 5;
    case Blame::kSourceIo:
      return 6;
  }
  return 1;
}

// Whose a failure with errno `code` of opening, stat'ing or scanning SOURCE
// is: kSourceIo when the file system SOURCE is on does not answer (an I/O
// error, a timeout, a stale or disconnected mount, a lost link: the node's
// PFS is sick), else kSource (missing, permissions, not a directory, a loop:
// what SOURCE's owner can fix).
constexpr Blame SourceBlame(int code) {
  switch (code) {
    case EIO:
    case ESTALE:
    case ETIMEDOUT:
    case ENOTCONN:
    case EHOSTDOWN:
    case EHOSTUNREACH:
    case ECONNABORTED:
    case ECONNRESET:
    case ENOLINK:
    case EREMOTEIO:
      return Blame::kSourceIo;
    default:
      return Blame::kSource;
  }
}

// Whose a failure with errno `code` of using a tier or index directory the
// command line names is: kPath when it is the directory's state (missing,
// not a directory, a symlink, owner or mode, read-only, full, no inodes,
// held by another daemon, a file system that cannot hold a tier), kCommandLine
// for EINVAL (what the options say), else kMachine (the device failing,
// memory).
constexpr Blame PathBlame(int code) {
  switch (code) {
    case ENOENT:
    case ENOTDIR:
    case ELOOP:
    case EACCES:
    case EPERM:
    case EROFS:
    case ENOSPC:
    case EDQUOT:
    case EBUSY:
    case EEXIST:
    case EMLINK:
    case ENAMETOOLONG:
    case EOPNOTSUPP:
      return Blame::kPath;
    case EINVAL:
      return Blame::kCommandLine;
    default:
      return Blame::kMachine;
  }
}

// A step of making the mount: none (it went on), or whose failure and why.
struct MountFailure {
  Blame blame = Blame::kNone;
  std::string message;
  explicit operator bool() const { return blame != Blame::kNone; }
};

// None if `why` is ok, else `why`'s message blamed on `blame`.
inline MountFailure Blamed(Blame blame, const Status& why) {
  if (why.ok()) return {};
  return {blame, why.message()};
}

// None if `why` is ok, else `why` (of SOURCE) blamed by SourceBlame.
inline MountFailure SourceFailure(const Status& why) {
  return Blamed(SourceBlame(why.code()), why);
}

}  // namespace tierfs
