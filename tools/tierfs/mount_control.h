// MountControl: the subcommands' view of a running tierfs through its
// control directory `MOUNT/.tierfs/` (stats to read, order/stage/prefetch to
// write). It talks to the mount only through ordinary file I/O, so it works
// for any user that may read the mount, and it never links the daemon.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "tiering/base/json_value.h"

namespace tierfs::cli {

// A failure worth a one-line message to the user (exit status 1).
class ControlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class MountControl {
 public:
  // Checks that `mount` is the root of a tierfs mount (it has
  // `.tierfs/stats`); throws ControlError naming what is wrong otherwise
  // (missing, not a directory, a stale FUSE mount, not tierfs, a
  // subdirectory of a tierfs mount).
  explicit MountControl(std::string mount);

  const std::string& mount() const { return mount_; }
  // MOUNT/.tierfs/NAME
  std::string ControlPath(std::string_view name) const;
  // Whether the daemon offers the control file NAME (older daemons lack some).
  bool HasControl(std::string_view name) const;

  // A fresh snapshot of `.tierfs/stats`: its text, or parsed. Throws
  // ControlError if it cannot be read or is not JSON.
  std::string ReadStatsText() const;
  JsonValue ReadStats() const;
  // Reads a small control file (e.g. "prefetch") whole; throws ControlError.
  std::string ReadControl(std::string_view name) const;

  // Writes `data` to `.tierfs/NAME` with one open, as few writes as the
  // kernel allows, and one close, opened O_APPEND (or O_TRUNC with
  // `truncate`). Returns 0, or the errno of the first failure.
  int WriteControl(std::string_view name, std::string_view data, bool truncate = false) const;
  // "writing MOUNT/.tierfs/NAME: ERROR", and for a permission error who may
  // write it and what to do.
  std::string WriteFailure(std::string_view name, int err) const;

 private:
  std::string mount_;
};

// Reads all of `path` ("-" = standard input); throws ControlError.
std::string ReadInput(const std::string& path);

}  // namespace tierfs::cli
