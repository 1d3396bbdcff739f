// TierJournal: the index of a directory tier, an append-only text file. Each
// line records one chunk published ("P": its record number, the tier file
// holding it, its origin) or removed ("R": its record number). A line is
// written with one write() after the chunk's bytes were made durable
// (fdatasync), so after a crash the journal names only complete ranges; a
// torn last line is ignored.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "tiering/base/mutex.h"
#include "tiering/io/file_io.h"
#include "tiering/store/tier.h"

namespace tierfs {

class TierJournal {
 public:
  // Sequence numbers are below this: larger ones in a record or a file name
  // are not ours (and could wrap a counter).
  static constexpr uint64_t kSeqLimit = uint64_t{1} << 63;

  // One published chunk: the sequence number of the tier file that holds
  // it (data/f<file>) and what it is a copy of (its range: origin.offset,
  // origin.length).
  struct Record {
    uint64_t file = 0;
    ChunkOrigin origin;
  };
  // Record number -> record.
  using Entries = std::map<uint64_t, Record>;

  // The journal at `path`, written through `io`. Appends fail (-EBADF) until
  // Rewrite has run. REQUIRES: `io` outlives the journal.
  TierJournal(FileIo* io, std::string path) : io_(io), path_(std::move(path)) {}

  // `source` names the SOURCE the tier holds copies of (an identity string,
  // written in the journal's header).
  // Reads the records of the journal. A missing journal, or one of another
  // format or another SOURCE (then *foreign is set), has none. 0, or -errno
  // with *out empty.
  int Load(const std::string& source, Entries* out, bool* foreign = nullptr) const;
  // Writes a fresh journal holding `entries` (via a temporary file, flushed,
  // then renamed), then opens it for appending. 0 or -errno.
  // REQUIRES: no Append runs concurrently whose record must survive (it runs
  // at recovery, before the tier stores anything).
  int Rewrite(const std::string& source, const Entries& entries);
  // Rewrites the journal keeping only the published records whose seq
  // `keep` takes, so that it does not grow without bound under eviction
  // churn. The journal is read and the new one written and flushed outside
  // the file lock, appends going on; appenders wait only while the lines
  // they added meanwhile are copied over (one small fdatasync) and the new
  // journal is renamed into place; its name is made durable after (or by
  // a Sync meanwhile). On an error the old journal stays in use. 0 or
  // -errno. REQUIRES: one Compact at a time, none beside Rewrite.
  int Compact(const std::string& source, const std::function<bool(uint64_t)>& keep);
  // Lines in the journal since the last Rewrite or Compact, plus the records
  // that wrote: what Compact would shrink.
  uint64_t records() const { return records_.load(std::memory_order_relaxed); }
  // Append one record each, with one write (O_APPEND). 0 or -errno.
  // Thread-safe: appenders do not wait for each other.
  int AppendPublish(uint64_t seq, const Record& record);
  int AppendRemove(uint64_t seq);
  // Makes the records appended so far durable (fdatasync). 0 or -errno.
  int Sync();

  const std::string& path() const { return path_; }

  // The text of one record, and its parse; exposed for tests. ParseLine
  // rejects a seq or a file of kSeqLimit or more.
  static std::string FormatPublish(uint64_t seq, const Record& record);
  static bool ParseLine(const std::string& line, char* op, uint64_t* seq, Record* record);

 private:
  int AppendLine(const std::string& line);
  // Applies the whole lines of text[begin, stop) to *out (P adds, R erases).
  static void ApplyLines(const std::string& text, size_t begin, size_t stop, Entries* out);
  // Writes `text` into the temporary journal beside the old one, flushed;
  // it is left open in *out for more. 0 or -errno (nothing left behind).
  int WriteTemp(const std::string& text, std::unique_ptr<LocalFile>* out);
  // Closes the temporary journal, renames it over the journal and opens
  // that for appending into *appender. 0 or -errno.
  int Install(std::unique_ptr<LocalFile> temp, std::unique_ptr<LocalFile>* appender);
  // Makes the last rename of the journal durable (syncs its directory) if
  // it is not yet. 0 or -errno.
  int SyncName();
  FileIo* const io_;
  const std::string path_;
  // Guards file_ (the pointer, not the file's contents). A leaf: no other lock
  // is taken while it is held. Appenders hold it shared across their one
  // write(2), so they never wait for each other (O_APPEND places each write
  // whole at the end); Rewrite holds it exclusive only to swap the pointer
  // (the old file is closed after the lock is released); Compact holds it
  // exclusive while it copies the lines appended since its read and swaps
  // the files, so no record is lost.
  SharedMutex file_mu_;
  std::unique_ptr<LocalFile> file_ GUARDED_BY(file_mu_);  // open O_APPEND once Rewrite succeeded
  std::atomic<uint64_t> records_{0};
  std::atomic<bool> rename_unsynced_{false};  // the journal's directory not synced since a rename
};

}  // namespace tierfs
