// HintIntake: the bytes written to .tierfs/order and .tierfs/stage turned
// into files and directives (one HintParser per control file, lines split
// across writes joined per writer), with the counts of lines accepted and
// refused and the last one refused. It only parses: what the lines mean is
// the order model's and the stage planner's business.
//
// Thread-safe; its lock is a leaf, never held while a line is resolved
// (its writer checked by HintAccess, which may ask SOURCE): the stats walk,
// /metrics and the planner never wait for SOURCE here.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "prefetch/planners/hint_parser.h"
#include "tiering/base/counter_visitor.h"
#include "tiering/base/mutex.h"

namespace tierfs {

class HintIntake {
 public:
  // Absolute paths below `mountpoint` are accepted as well as relative ones.
  // `show_rejected_lines`: whether the stats show a rejected line itself or
  // only why (when other users read the stats of lines they did not write).
  HintIntake(const Namespace* ns, const std::string& mountpoint, bool show_rejected_lines = true);

  // What writers may name (null: everything). REQUIRES: set before the
  // first write; `access` outlives the intake.
  void set_access(HintAccess* access);

  HintParser::Result FeedOrder(const HintWriter& writer, uint64_t off, std::string_view data);
  HintParser::Result FeedStage(const HintWriter& writer, uint64_t off, std::string_view data);
  // Forgets the order file's unfinished lines (the order is being cleared).
  void DropOrderTails();
  // The lines whose writer has not sent the newline for `age`, taken as
  // complete: the order's by writer, the stage file's together.
  void FlushLate(std::chrono::steady_clock::duration age,
                 std::map<uint64_t, HintParser::Result>* order,
                 std::map<uint64_t, HintParser::Result>* stage);

  // Paths written to the order file and accepted, ever.
  uint64_t order_paths() const;

  // valid_lines (of the order: directive_lines of them), rejected_lines and
  // the last line refused, of each file.
  void VisitOrderCounters(CounterVisitor& v) const;
  void VisitStageCounters(CounterVisitor& v) const;

 private:
  // Split, Resolve outside mu_, then Note and count under it.
  HintParser::Result Feed(HintParser& parser, const HintWriter& writer, uint64_t off,
                          std::string_view data, bool counted);
  void Settle(HintParser& parser, const std::vector<HintParser::Line>& lines,
              HintParser::Result* result, bool counted);

  // Guards the parsers' state (their writers' unfinished lines, the last
  // rejected line) and the counts. A leaf: taken with no other lock held,
  // and nothing is asked under it (lines are resolved outside it).
  mutable Mutex mu_;
  // Their Split, TakeTails, Note and VisitRejected under mu_; Resolve,
  // const and reading only what construction set, without it (so not
  // GUARDED_BY: clang would refuse the reference Resolve is called on).
  HintParser order_;
  HintParser stage_;
  uint64_t order_valid_ GUARDED_BY(mu_) = 0;
  uint64_t order_directives_ GUARDED_BY(mu_) = 0;
  uint64_t order_rejected_ GUARDED_BY(mu_) = 0;
};

}  // namespace tierfs
