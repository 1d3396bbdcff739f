// HintParser: turns bytes written to a control file (.tierfs/order,
// .tierfs/stage) into files of the namespace. Writers may split a line over
// several write() calls, so each writer's unfinished last line is kept (by
// writer id and file offset) until it is completed, its writer moves on, or
// it grows stale. Hostile input is bounded: a line longer than PATH_MAX is
// rejected without being stored, and at most kMaxWriters tails are kept.
//
// The order file also takes directives, lines that begin with "//" (no path
// does: relative paths cannot begin with '/', and absolute ones are written
// with one): "//stream NAME" sends the writer's later lines to the stream
// NAME (1-64 of [A-Za-z0-9._:-]) instead of its own; "//epoch" starts a new
// epoch of the stream (what it declared before and was not read is dropped).
//
// Every rejected line is counted; the first one of each writer's stream of
// writes (writes at consecutive offsets) is kept with why, for people
// (.tierfs/stats: "last_rejected"), so the writer of a bad list can be told
// which line was wrong without reading the daemon's log.
//
// A line names only what its writer could see through the mount
// (HintAccess): a node the writer may not reach is rejected exactly as a
// name that is not in the mount, and a directory stands for the files
// below it that the writer could open. So nothing a writer learns (the
// write's outcome, the counts and sizes in the stats) says more about
// SOURCE than the writer could list.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tiering/base/counter_visitor.h"
#include "tiering/io/backend.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {

// Who wrote to a control file: `id` tells its streams of writes apart (the
// writing thread), `caller` is whose permissions its lines are checked with.
struct HintWriter {
  uint64_t id = 0;
  AccessCaller caller;
};

// Whether a writer may name a node of the namespace in a control file.
class HintAccess {
 public:
  virtual ~HintAccess() = default;
  // A regular file `caller` could open through the mount, a directory it
  // could list, anything else in a directory it could search. May ask
  // SOURCE; thread-safe.
  virtual bool MayName(const AccessCaller& caller, NodeId id) = 0;
};

class HintParser {
 public:
  static constexpr size_t kMaxLine = 4096;
  static constexpr size_t kMaxWriters = 256;

  // A directive, in order with the files: it applies from files[at] on.
  struct Mark {
    enum class Kind { kStream, kEpoch };
    size_t at;
    Kind kind;
    std::string stream;  // kStream: the name
  };
  struct Result {
    std::vector<NodeId> files;  // in order
    std::vector<Mark> marks;    // in order
    uint64_t valid = 0;         // lines that named something, or directives
    uint64_t directives = 0;    // of those, directives
    uint64_t rejected = 0;      // lines that did not (counted, never fatal)
    uid_t uid = 0;              // whose lines (one writer's; merged results: root's)
  };
  static constexpr size_t kMaxStreamName = 64;
  // A rejected line as shown to people, and why it was rejected.
  struct Rejection {
    std::string line;  // Shown(): at most kMaxShown bytes, printable
    std::string reason;
  };
  static constexpr size_t kMaxShown = 200;
  // `line` for a person's terminal: valid UTF-8 is kept, other bytes and
  // control characters become \xNN, and more than kMaxShown bytes end in "...".
  static std::string Shown(std::string_view line);

  // `mountpoint`: absolute paths below it are accepted. `directories`: a
  // line naming a directory stands for every file below it (stage); else it
  // is rejected (order). `directives`: "//" lines are directives (order);
  // else they are rejected.
  HintParser(const Namespace* ns, std::string mountpoint, bool directories,
             bool directives = false);
  // What writers may name (null, the default: everything). REQUIRES: set
  // before the first Feed; `access` outlives the parser.
  void set_access(HintAccess* access) { access_ = access; }
  // Whether VisitRejected shows the rejected line (default) or only why.
  // REQUIRES: set before the first Feed.
  void set_show_lines(bool show) { show_lines_ = show; }

  // A line ended by its writer (or taken as ended), not yet resolved.
  struct Line {
    std::string text;
    bool overlong = false;  // text holds the line's first kMaxShown bytes
    AccessCaller caller;    // whose line it is
    uint64_t writer = 0;    // HintWriter::id
    uint64_t stream = 0;    // its writer's stream of writes (a serial)
  };

  // Bytes written by `writer` at file offset `offset`: Split, Resolve each
  // line, Note each rejection. For one thread; HintIntake runs the three
  // steps itself so that only Split and Note are under its lock (Resolve
  // may ask SOURCE as the writer).
  void Feed(const HintWriter& writer, uint64_t offset, std::string_view data, Result* out);
  // The lines `data` ends, in order (the writer's unfinished one is kept).
  void Split(const HintWriter& writer, uint64_t offset, std::string_view data,
             std::vector<Line>* lines);
  // The unfinished lines last written longer ago than `age` (all for 0),
  // each writer's apart.
  void TakeTails(std::chrono::steady_clock::duration age,
                 std::map<uint64_t, std::vector<Line>>* by_writer);
  // Resolves `line` into `out`; a rejection is counted there and returned.
  // Reads only what does not change after construction: thread-safe.
  std::optional<Rejection> Resolve(const Line& line, Result* out) const;
  // Keeps `rejection` as last_rejected() if it is the first of its stream.
  void Note(const Line& line, Rejection rejection);
  // Ends the unfinished lines last written longer ago than `age` (all for 0).
  void FlushTails(std::chrono::steady_clock::duration age, Result* out);
  // The same, each writer's lines apart (directives apply per writer).
  void FlushTails(std::chrono::steady_clock::duration age, std::map<uint64_t, Result>* by_writer);
  // Resolves one line (without its newline) written by `caller`. Empty
  // lines are ignored. A rejected line is counted in `out` and returned
  // with why.
  std::optional<Rejection> ResolveLine(std::string_view line, const AccessCaller& caller,
                                       Result* out) const;

  // The first rejected line of the latest stream of writes that had one.
  const std::optional<Rejection>& last_rejected() const { return last_rejected_; }
  // "last_rejected": {line, reason} when there is one (JSON only: free text).
  void VisitRejected(CounterVisitor& v) const;

 private:
  struct Tail {
    AccessCaller caller;  // whose lines these are
    std::string text;
    uint64_t next_offset = 0;
    uint64_t stream = 0;        // its stream of writes
    bool overlong = false;      // text holds the line's first kMaxShown bytes
    bool has_rejected = false;  // this stream's first rejection was kept
    std::chrono::steady_clock::time_point last;
  };
  // Moves the tail's text to `lines` as an ended line.
  static void EndTail(uint64_t writer, Tail& tail, std::vector<Line>* lines);
  // Resolve and Note for each line, into `out`.
  void ResolveAll(const std::vector<Line>& lines, Result* out);
  // The files below `dir` that `caller` may name, through the directories
  // it may name.
  void AddTree(NodeId dir, const AccessCaller& caller, Result* out) const;
  bool MayName(const AccessCaller& caller, NodeId id) const {
    return access_ == nullptr || access_->MayName(caller, id);
  }
  std::optional<Rejection> ResolveDirective(std::string_view line, Result* out) const;

  const Namespace* const ns_;
  const std::string mountpoint_;
  const bool directories_;
  const bool directives_;
  HintAccess* access_ = nullptr;
  bool show_lines_ = true;
  std::map<uint64_t, Tail> tails_;  // by writer id
  uint64_t next_stream_ = 1;
  std::optional<Rejection> last_rejected_;
  uint64_t last_rejected_stream_ = 0;  // whose, when its tail has gone
};

}  // namespace tierfs
