// HintParser: turns bytes written to a control file (.tierfs/order,
// .tierfs/stage) into files of the namespace. Writers may split a line over
// several write() calls, so each writer's unfinished last line is kept (by
// writer id and file offset) until it is completed, its writer moves on, or
// it grows stale. Hostile input is bounded: a line longer than PATH_MAX is
// rejected without being stored, and at most kMaxWriters tails are kept.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tiering/namespace.h"

namespace tierfs {

class HintParser {
 public:
  static constexpr size_t kMaxLine = 4096;
  static constexpr size_t kMaxWriters = 256;

  struct Result {
    std::vector<NodeId> files;  // in order
    uint64_t valid = 0;         // lines that named something
    uint64_t rejected = 0;      // lines that did not (counted, never fatal)
  };

  // `mountpoint`: absolute paths below it are accepted. `directories`: a
  // line naming a directory stands for every file below it (stage); else it
  // is rejected (order).
  HintParser(const Namespace* ns, std::string mountpoint, bool directories);

  // Bytes written by `writer` (a thread id) at file offset `offset`.
  void Feed(uint64_t writer, uint64_t offset, std::string_view data, Result* out);
  // Ends the unfinished lines last written longer ago than `age` (all for 0).
  void FlushTails(std::chrono::steady_clock::duration age, Result* out);
  // Resolves one line (without its newline). Empty lines are ignored.
  void ResolveLine(std::string_view line, Result* out) const;

 private:
  struct Tail {
    std::string text;
    uint64_t next_offset = 0;
    bool overlong = false;
    std::chrono::steady_clock::time_point last;
  };
  void EndTail(Tail& tail, Result* out);
  void AddTree(NodeId dir, Result* out) const;

  const Namespace* const ns_;
  const std::string mountpoint_;
  const bool directories_;
  std::map<uint64_t, Tail> tails_;  // by writer
};

}  // namespace tierfs
