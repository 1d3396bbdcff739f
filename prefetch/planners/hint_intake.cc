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

HintParser::Result HintIntake::FeedOrder(const HintWriter& writer, uint64_t off,
                                         std::string_view data) {
  HintParser::Result result;
  MutexLock lock(mu_);
  order_.Feed(writer, off, data, &result);
  order_valid_ += result.valid;
  order_directives_ += result.directives;
  order_rejected_ += result.rejected;
  return result;
}

HintParser::Result HintIntake::FeedStage(const HintWriter& writer, uint64_t off,
                                         std::string_view data) {
  HintParser::Result result;
  MutexLock lock(mu_);
  stage_.Feed(writer, off, data, &result);
  return result;
}

void HintIntake::DropOrderTails() {
  HintParser::Result dropped;
  MutexLock lock(mu_);
  order_.FlushTails(std::chrono::steady_clock::duration::zero(), &dropped);
}

void HintIntake::FlushLate(std::chrono::steady_clock::duration age,
                           std::map<uint64_t, HintParser::Result>* order,
                           std::map<uint64_t, HintParser::Result>* stage) {
  MutexLock lock(mu_);
  order_.FlushTails(age, order);
  for (const auto& [writer, r] : *order) {
    order_valid_ += r.valid;
    order_directives_ += r.directives;
    order_rejected_ += r.rejected;
  }
  stage_.FlushTails(age, stage);
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
