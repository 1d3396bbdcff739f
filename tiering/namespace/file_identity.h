// FileIdentity: what a regular file of SOURCE must still have to be served
// as the version a snapshot took: its size, mtime, ctime and inode number
// (a rewrite that keeps size and mtime, `cp -p`, still moves ctime and
// mostly the inode). The one identity check, for every place that holds a
// version of a file: a SOURCE file opened after the scan (stat), a tier
// copy found at restart (its journal's origin), a peer's request (its
// chunk reference, made from the asker's snapshot).
#pragma once

#include <sys/stat.h>

#include <cstdint>

#include "tiering/namespace/namespace.h"

namespace tierfs {

struct FileIdentity {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  // SOURCE's st_ino, or 0 where SOURCE's inode numbers are not stable (a
  // FUSE SOURCE): then a snapshot's ino is 0 and the inode is not compared.
  uint64_t ino = 0;

  static FileIdentity Of(const Node& n) { return {n.size, n.mtime_ns, n.ctime_ns, n.ino}; }
  static FileIdentity Of(const struct stat& st) {
    return {static_cast<uint64_t>(st.st_size), Nanos(st.st_mtim), Nanos(st.st_ctim),
            static_cast<uint64_t>(st.st_ino)};
  }
  // Two records of one version (a snapshot's and a copy's): equal in all four.
  bool operator==(const FileIdentity&) const = default;
  // What about the file `now` (as found on SOURCE) differs from this, the
  // snapshot's, in words for a log line, or nullptr if it is the same
  // version. The inode only when the snapshot kept one.
  const char* ChangeIn(const FileIdentity& now) const {
    if (ino != 0 && now.ino != ino) return "was replaced (another inode)";
    if (now.size != size) return "changed size";
    if (now.mtime_ns != mtime_ns || now.ctime_ns != ctime_ns) {
      return "was modified (mtime or ctime)";
    }
    return nullptr;
  }
};

}  // namespace tierfs
