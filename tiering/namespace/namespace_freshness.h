// Freshness: whether a mounted snapshot still describes SOURCE. A daemon
// kept across jobs serves the snapshot it took at mount; before a new job
// relies on it, `.tierfs/changes` asks SOURCE about every directory and
// regular file of the snapshot, and says how many changed.
//
// Cost: one stat per directory and regular file of the snapshot, `threads`
// in flight (a PFS is latency-bound), no listing. Symlinks are not checked.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tiering/io/backend.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {

// Why SOURCE's attributes `st` (lstat) no longer describe node `n`, or
// nullptr if they still do. A regular file: still a regular file, the same
// inode (when the snapshot kept one: n.ino != 0), size, mtime and ctime:
// the identity a file must have to be served as `n`. A directory: still a
// directory with the same mtime and ctime (an entry added, removed or
// renamed moves both). Other node types: the type only.
const char* IdentityChange(const Node& n, const struct stat& st);

// What CheckFreshness found.
struct FreshnessReport {
  uint64_t checked_files = 0, checked_dirs = 0;
  uint64_t changed_files = 0, changed_dirs = 0;  // present, but not as the snapshot says
  uint64_t missing = 0;                          // files or directories gone (ENOENT, ENOTDIR)
  uint64_t errors = 0;  // any other error of the stat (EIO, EACCES, ...): counted, not fatal
  double seconds = 0;
  // The first changed or missing paths ("path: why"), at most max_samples.
  std::vector<std::string> samples;
};

// Stats every directory and regular file of `ns` on SOURCE through
// `backend` (paths beneath its root, no symlink followed), `threads` at a
// time (0: kValidateThreads), and compares each with the snapshot.
// Thread-safe for concurrent callers; takes no lock of anyone else's.
FreshnessReport CheckFreshness(Backend* backend, const Namespace& ns, unsigned threads,
                               size_t max_samples = 8);

// One JSON line: {"checked_files":N,"checked_dirs":M,"changed_files":a,
// "changed_dirs":b,"missing":c,"errors":e,"seconds":s}
std::string FreshnessJson(const FreshnessReport& report);

}  // namespace tierfs
