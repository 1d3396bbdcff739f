// Why a mount could not be made, and whose it is to fix. The exit status
// says whose (the Slurm prolog acts on it: a job's SOURCE or MOUNTPOINT is
// not the node's failure), and ExitStatus is the one place that chooses it.
#pragma once

#include <string>

#include "tiering/base/status.h"

namespace tierfs {

enum class Blame {
  kNone,         // exit 0: mounted, served and unmounted cleanly
  kMachine,      // exit 1: this machine (FUSE, memory, tiers, limits, a failed loop)
  kCommandLine,  // exit 2: the options, said before SOURCE is touched
  kSource,       // exit 3: SOURCE, its owner's to fix
  kMountpoint,   // exit 4: MOUNTPOINT, its owner's to fix
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
  }
  return 1;
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

}  // namespace tierfs
