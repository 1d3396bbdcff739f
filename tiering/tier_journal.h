// TierJournal: the index of a directory tier, an append-only text file. Each
// line records one chunk file published ("P") or removed ("R"). A line is
// written with one write() after the file's rename, so after a crash the
// journal names only complete files; a torn last line is ignored.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>

#include "tiering/file_io.h"
#include "tiering/tier.h"

namespace tierfs {

class TierJournal {
 public:
  // Sequence numbers are below this: larger ones in a record or a file name
  // are not ours (and could wrap a counter).
  static constexpr uint64_t kSeqLimit = uint64_t{1} << 63;

  // The journal at `path`, written through `io`. Appends fail (-EBADF) until
  // Rewrite has run. REQUIRES: `io` outlives the journal.
  TierJournal(FileIo* io, std::string path) : io_(io), path_(std::move(path)) {}

  // Reads the records of the journal (missing or foreign = none): seq ->
  // origin. 0, or -errno with *out empty.
  int Load(std::map<uint64_t, ChunkOrigin>* out) const;
  // Writes a fresh journal holding `entries` (via a temporary file, flushed,
  // then renamed), then opens it for appending. 0 or -errno.
  // REQUIRES: no Append runs concurrently whose record must survive (it runs
  // at recovery, before the tier stores anything).
  int Rewrite(const std::map<uint64_t, ChunkOrigin>& entries);
  // Append one record each, with one write (O_APPEND). 0 or -errno.
  // Thread-safe: appenders do not wait for each other.
  int AppendPublish(uint64_t seq, const ChunkOrigin& origin);
  int AppendRemove(uint64_t seq);

  const std::string& path() const { return path_; }

  // The text of one record, and its parse; exposed for tests. ParseLine
  // rejects a seq of kSeqLimit or more.
  static std::string FormatPublish(uint64_t seq, const ChunkOrigin& origin);
  static bool ParseLine(const std::string& line, char* op, uint64_t* seq, ChunkOrigin* origin);

 private:
  int AppendLine(const std::string& line);
  FileIo* const io_;
  const std::string path_;
  // Guards file_ (the pointer, not the file's contents). A leaf: no other lock
  // is taken while it is held. Appenders hold it shared across their one
  // write(2), so they never wait for each other (O_APPEND places each write
  // whole at the end); Rewrite holds it exclusive only to swap the pointer,
  // never across I/O (the old file is closed after the lock is released).
  std::shared_mutex file_mu_;
  std::unique_ptr<LocalFile> file_;  // open O_APPEND once Rewrite succeeded
};

}  // namespace tierfs
