// TierJournal: the index of a directory tier, an append-only text file. Each
// line records one chunk file published ("P") or removed ("R"). A line is
// written with one write() after the file's rename, so after a crash the
// journal names only complete files; a torn last line is ignored.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "tiering/tier.h"

namespace tierfs {

class TierJournal {
 public:
  ~TierJournal();
  // Reads the records of an existing journal (missing = empty): seq -> origin.
  static std::map<uint64_t, ChunkOrigin> Load(const std::string& path);
  // Writes a fresh journal holding `entries` (via a temporary file and
  // rename), then opens it for appending. 0 or -errno.
  int Rewrite(const std::string& path, const std::map<uint64_t, ChunkOrigin>& entries);
  int AppendPublish(uint64_t seq, const ChunkOrigin& origin);
  int AppendRemove(uint64_t seq);

  // The text of one record, and its parse; exposed for tests.
  static std::string FormatPublish(uint64_t seq, const ChunkOrigin& origin);
  static bool ParseLine(const std::string& line, char* op, uint64_t* seq, ChunkOrigin* origin);

 private:
  int AppendLine(const std::string& line);
  std::mutex mu_;  // guards fd_ writes; a leaf lock
  int fd_ = -1;
};

}  // namespace tierfs
