#include "prefetch/planners/hint_intake.h"

namespace tierfs {

HintIntake::HintIntake(const Namespace* ns, const std::string& mountpoint, bool show_rejected_lines)
    : order_(ns, mountpoint, /*directories=*/false, /*directives=*/true),
      stage_(ns, mountpoint, /*directories=*/true) {
  order_.set_show_lines(show_rejected_lines);
  stage_.set_show_lines(show_rejected_lines);
}

void HintIntake::set_access(HintAccess* access) {
  MutexLock lock(mu_);
  order_.set_access(access);
  stage_.set_access(access);
}

// The lines are split and their rejections noted under mu_; they are
// resolved outside it, since that may ask SOURCE as their writer.
HintParser::Result HintIntake::Feed(HintParser& parser, const HintWriter& writer, uint64_t off,
                                    std::string_view data, bool counted) {
  std::vector<HintParser::Line> lines;
  {
    MutexLock lock(mu_);
    parser.Split(writer, off, data, &lines);
  }
  HintParser::Result result;
  result.uid = lines.empty() ? writer.caller.uid : lines.back().caller.uid;
  Settle(parser, lines, &result, counted);
  return result;
}

void HintIntake::Settle(HintParser& parser, const std::vector<HintParser::Line>& lines,
                        HintParser::Result* result, bool counted) {
  std::vector<std::pair<size_t, HintParser::Rejection>> rejected;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (auto r = parser.Resolve(lines[i], result)) rejected.emplace_back(i, std::move(*r));
  }
  MutexLock lock(mu_);
  for (auto& [i, r] : rejected) parser.Note(lines[i], std::move(r));
  if (counted) {
    order_valid_ += result->valid;
    order_directives_ += result->directives;
    order_rejected_ += result->rejected;
  }
}

HintParser::Result HintIntake::FeedOrder(const HintWriter& writer, uint64_t off,
                                         std::string_view data) {
  return Feed(order_, writer, off, data, /*counted=*/true);
}

HintParser::Result HintIntake::FeedStage(const HintWriter& writer, uint64_t off,
                                         std::string_view data) {
  return Feed(stage_, writer, off, data, /*counted=*/false);
}

void HintIntake::DropOrderTails() {
  std::map<uint64_t, std::vector<HintParser::Line>> dropped;
  MutexLock lock(mu_);
  order_.TakeTails(std::chrono::steady_clock::duration::zero(), &dropped);
}

void HintIntake::FlushLate(std::chrono::steady_clock::duration age,
                           std::map<uint64_t, HintParser::Result>* order,
                           std::map<uint64_t, HintParser::Result>* stage) {
  std::map<uint64_t, std::vector<HintParser::Line>> order_lines, stage_lines;
  {
    MutexLock lock(mu_);
    order_.TakeTails(age, &order_lines);
    stage_.TakeTails(age, &stage_lines);
  }
  auto settle_all = [this](HintParser& parser, const auto& by_writer, auto* results, bool counted) {
    for (const auto& [writer, lines] : by_writer) {
      HintParser::Result& r = (*results)[writer];
      r.uid = lines.back().caller.uid;  // TakeTails gives each writer at least one line
      Settle(parser, lines, &r, counted);
    }
  };
  settle_all(order_, order_lines, order, /*counted=*/true);
  settle_all(stage_, stage_lines, stage, /*counted=*/false);
}

uint64_t HintIntake::order_paths() const {
  MutexLock lock(mu_);
  return order_valid_ - order_directives_;
}

void HintIntake::VisitOrderCounters(CounterVisitor& v) const {
  MutexLock lock(mu_);
  v.Counter("valid_lines", order_valid_,
            {"Lines written to .tierfs/order and accepted: paths, and directives."});
  v.Counter("directive_lines", order_directives_,
            {"Directives written to .tierfs/order and accepted (stream and epoch lines)."});
  v.Counter("rejected_lines", order_rejected_, {"Lines written to .tierfs/order and rejected."});
  order_.VisitRejected(v);
}

void HintIntake::VisitStageCounters(CounterVisitor& v) const {
  MutexLock lock(mu_);
  stage_.VisitRejected(v);
}

}  // namespace tierfs
