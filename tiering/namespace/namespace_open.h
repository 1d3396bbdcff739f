// OpenNamespace: the snapshot a mount serves, from a saved index when one
// still describes SOURCE, from a scan otherwise.
//
//   index valid, check=none  -> the index, mapped; no SOURCE operation
//   index valid, check=dirs  -> one stat per directory (in parallel); changed
//                               directories are listed again, the others taken
//                               from the index; the index is written back
//   check=full, or no valid index -> a full scan, then the index is written
//
// Shared index (one file for a job's nodes, on a shared file system): the
// node that must build it first creates INDEX.lock (O_EXCL); the others wait
// for the lock to go (at most `wait_s`, then they scan themselves) and load
// the index. The builder touches its lock every 5 s. A lock of a dead
// builder on this host, one not touched for 30 s (a builder that died on
// another node) or dated in the future is broken and taken at once; one
// that belongs to another user (planted in a shared directory) is not
// waited for; one older than `wait_s` is stale and removed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tiering/namespace/index_check.h"
#include "tiering/namespace/namespace.h"
#include "tiering/namespace/namespace_index.h"

namespace tierfs {

// The margin below an index's creation time inside which directory changes
// are treated as possibly racy (coarse file system timestamps).
inline constexpr int64_t kRacyMarginNs = 2'000'000'000;
// Stats in flight when validating an index with scan_threads=auto.
inline constexpr unsigned kValidateThreads = 128;

struct OpenOptions {
  std::string index;  // index file; "" = no index (scan only)
  IndexCheck check = IndexCheck::kDirs;
  unsigned scan_threads = 0;  // 0: tuned while scanning (ScanOptions::threads)
  unsigned wait_s = 600;      // longest wait for another node's build
  bool write = true;          // write the index when it was (re)built
  int64_t racy_margin_ns = kRacyMarginNs;
  std::shared_ptr<FileIo> io;  // the index's and its lock's file I/O; null: the local one
};

// What OpenNamespace did, for the log and for `tierfs index`.
struct OpenReport {
  std::string how;                 // one line: "index loaded, 1001 directories checked, ..."
  std::vector<std::string> notes;  // warnings: why an index was refused, not written, ...
  // The errors behind some notes, ok when there was none: why the saved
  // index was not used (ENOENT: there was none), why it was not written,
  // why its lock could not be created.
  Status load_error, write_error, lock_error;
  bool from_index = false;  // some of the snapshot came from the index
  bool scanned = false;     // SOURCE was listed (fully or partly)
  bool written = false;     // the index file was (re)written
  uint64_t dirs_checked = 0, dirs_changed = 0;
  uint64_t meta_ops = 0;  // metadata operations sent to SOURCE
  double seconds = 0;
};

// `live`, if given, is updated as the scan goes (another thread may read it
// for a progress bar). Fails only when SOURCE cannot be scanned (see
// ScanNamespace); a bad index is a note, not an error.
Result<std::unique_ptr<Namespace>> OpenNamespace(Backend* backend, const SourceIdentity& source,
                                                 const OpenOptions& options, OpenReport* report,
                                                 ScanReport* live = nullptr);

// The directories of `ns` whose mtime or ctime differ on SOURCE now, or that
// are gone or no longer directories, or that changed at or after
// `racy_after_ns` (see ScanOptions): one stat each, `threads` in parallel
// (0: kValidateThreads).
// *stats counts the stats sent.
std::vector<NodeId> ChangedDirectories(Backend* backend, const Namespace& ns, unsigned threads,
                                       int64_t racy_after_ns, uint64_t* stats);

// Whether `dir` may hold an index a daemon running as the effective uid
// trusts: a real directory (no symlink), owned by that uid, writable by no
// one else. Returns ok or why not (the errno of lstat, ENOTDIR, EACCES).
Status CheckPrivateDirectory(const std::string& dir);

}  // namespace tierfs
