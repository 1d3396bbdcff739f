// The saved namespace index: a Namespace written to one file as it lies in
// memory (header, node array, name arena), so a mount maps it instead of
// scanning SOURCE. Versioned, checksummed (XXH64 per section), and stamped
// with SOURCE's identity and the time of the scan.
//
// The file is hostile input (anyone who can write it can put anything
// there): LoadIndex checks every offset and length before use, the checksums,
// and then the whole tree's layout (CheckLayout) before a Namespace sees it.
// Only files of the daemon's uid or root, writable by no one else, are
// trusted; root's files are copied rather than mapped when the daemon is
// not root (nothing may change under the mapping).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tiering/base/status.h"
#include "tiering/io/file_io.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {

inline constexpr uint32_t kIndexVersion = 2;  // 2: Node::ino

// Which SOURCE a snapshot describes.
struct SourceIdentity {
  std::string path;       // absolute, as resolved at mount
  uint64_t dev = 0;       // st_dev of SOURCE's root (differs between nodes on a PFS)
  uint64_t root_ino = 0;  // st_ino of SOURCE's root
};

// What an index file says about itself.
struct IndexInfo {
  SourceIdentity source;
  int64_t created_ns = 0;  // wall-clock time the scan began (CLOCK_REALTIME)
  uint64_t file_bytes = 0;
  bool mapped = false;  // mapped (the daemon's own file) rather than copied
};

// Writes `ns` to `path`: a temporary file beside it (O_EXCL, mode 0600),
// fsync, then rename over `path`, so readers see the old or the new index,
// never half of one. Returns ok or a message for the user, with the errno
// of the file operation that failed (ENOSPC: the device is full).
// Every file operation goes through `io` (null: the local file system).
Status WriteIndex(const Namespace& ns, const SourceIdentity& source, int64_t created_ns,
                  const std::string& path, FileIo* io = nullptr);

// Loads an index written by WriteIndex. `expected`: refuse one that describes
// another SOURCE (path or root inode; st_dev only logs, see above). Fails
// with a message naming the file and what is wrong: the errno of a failing
// file operation (ENOENT: there is none), EUCLEAN for a damaged file, EINVAL
// for one that is not an index of this version, EACCES for one not trusted,
// ESTALE for one of another SOURCE.
Result<std::unique_ptr<Namespace>> LoadIndex(const std::string& path,
                                             const SourceIdentity* expected,
                                             IndexInfo* info = nullptr, FileIo* io = nullptr);

// The wall clock in ns (for created_ns).
int64_t RealtimeNanos();

}  // namespace tierfs
