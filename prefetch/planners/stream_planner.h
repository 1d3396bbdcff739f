// StreamPlanner: the declared read orders of one mount, one stream per
// declarer. An 8-GPU node runs 8 ranks on one mount, each with its own
// sampler: each rank's order is a stream with its own position, so every
// rank gets look-ahead, not only the one furthest ahead.
//
// Who declares: by default the writing process (a stream per pid, named
// "pid:N"); a "//stream NAME" directive names it explicitly (several
// processes can then feed one stream, or one process several). "//epoch"
// starts a new epoch of the stream: what it declared before and was not
// read is abandoned, so a stream whose epoch the page cache served (the
// daemon saw no reads) does not stay an epoch behind.
//
// Next uses are compared across streams by lead: how many of its stream's
// reads are still to come before the occurrence (ranks of a data-parallel
// job step in lockstep, so a lead is a time). A read of a file is matched
// to the stream whose next occurrence of it has the smallest lead.
//
// Not thread-safe: the caller (Prefetcher) serializes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "prefetch/planners/hint_parser.h"
#include "prefetch/planners/order_plan.h"
#include "tiering/base/counter_visitor.h"
#include "tiering/store/next_use_table.h"

namespace tierfs {

class StreamPlanner {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxStreams = NextUseTable::kSlots;
  static constexpr size_t kMaxWriters = 256;               // remembered //stream choices
  static constexpr auto kIdle = std::chrono::minutes(10);  // then a stream is dropped
  // Streams with a Prometheus series of their own (a bounded set, whatever
  // the processes' ids): a stream takes the smallest slot free when it
  // starts; in the first kSeries it is named by its declared name, or
  // "process-SLOT" if it is a process's own (JSON: "pid:N"); the others
  // are added up as "other".
  static constexpr size_t kSeries = 16;

  // `nodes`: the namespace size; `max_entries`: positions held, all streams.
  // `next_uses` (may be null) is kept up to date with every file's declared
  // uses and every stream's cursor, and must outlive the planner.
  StreamPlanner(size_t nodes, size_t max_entries, NextUseTable* next_uses = nullptr);
  // Whether the figures name each stream as declared ("pid:N", a //stream
  // NAME: the default) or only by its slot ("stream-K", K as in kSeries):
  // off where every user may read the stats (control_owner=any), so that
  // a user's stream names and process ids are not shown to the others.
  // REQUIRES: set before the first Append.
  void set_show_names(bool show) { show_names_ = show; }

  struct Appended {
    uint64_t files = 0;           // appended
    uint64_t dropped = 0;         // over max_entries
    std::vector<NodeId> changed;  // files whose next uses changed
  };
  // Declares what `writer` (a process id) wrote: files, and directives.
  void Append(uint64_t writer, const HintParser::Result& r, Appended* out);
  // Forgets every stream; returns the files that had a declared use.
  std::vector<NodeId> Clear();

  // A read at offset 0 of `id`; `hit`: served from a tier without waiting.
  // Consumes the occurrence with the smallest lead; false if none. Sets
  // *occurrence (if given) to the consumed one's id (NextUses::next_id).
  bool Consume(NodeId id, bool hit, Clock::time_point now = Clock::now(),
               uint64_t* occurrence = nullptr);
  NextUses NextUse(NodeId id) const;

  using ReadyFn = std::function<bool(NodeId)>;
  using SizeFn = std::function<uint64_t(NodeId)>;
  // The files to promote next: every active stream's pending files that are
  // not `ready`, the stream with the smallest lead served first, at most
  // `window` files and about `max_bytes` ahead of the readers in all. Also
  // measures each stream's lead (resident files ahead of its cursor). Drops
  // streams idle longer than kIdle (their files in *changed).
  std::vector<NodeId> Lookahead(size_t window, uint64_t max_bytes, const ReadyFn& ready,
                                const SizeFn& size, std::vector<NodeId>* changed,
                                Clock::time_point now = Clock::now());
  // The smallest lead among streams with reads still to come (from the last
  // Lookahead); 0 without one.
  uint64_t min_lead() const;

  size_t streams() const { return streams_.size(); }
  uint64_t declared() const;
  uint64_t consumed() const;  // by the streams held now
  // declared, position, consumed, dropped, streams, and a "streams" list.
  void VisitCounters(CounterVisitor& v) const;

 private:
  struct Stream {
    std::string name;
    uint64_t serial;  // unique for the planner's life: occurrence ids
    OrderPlan plan;
    uint64_t lead = 0;
    uint64_t hits = 0, misses = 0, epochs = 0, abandoned = 0;
    Clock::time_point active;
    size_t slot = 0;     // see kSeries
    std::string series;  // the name of its Prometheus series
  };
  // Writes the uses of `ids` into next_uses_ as they are now.
  void Publish(const std::vector<NodeId>& ids);
  void Publish(NodeId id);
  void PublishCursor(const Stream& s);
  // Sets a new stream's slot and series (not yet in streams_).
  void AssignSeries(Stream* stream, bool by_pid) const;
  Stream* StreamFor(uint64_t writer, const std::string& name, Clock::time_point now,
                    std::vector<NodeId>* changed);
  void Drop(std::map<std::string, std::unique_ptr<Stream>>::iterator it,
            std::vector<NodeId>* changed);
  static void PendingFiles(const OrderPlan& plan, std::vector<NodeId>* out);

  const size_t nodes_;
  const size_t max_entries_;
  bool show_names_ = true;
  NextUseTable* const next_uses_;
  uint64_t next_serial_ = 1;
  uint64_t dropped_entries_ = 0, dropped_streams_ = 0;
  uint64_t consumed_total_ = 0;  // reads matched to a stream, ever
  std::map<std::string, std::unique_ptr<Stream>> streams_;
  std::map<uint64_t, std::string> writer_stream_;  // //stream choices by writer
};

}  // namespace tierfs
