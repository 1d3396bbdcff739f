// PrometheusCounterWriter: the counters walk written in the Prometheus text
// exposition format. A figure is named after its path
// (source.read_bytes -> tierfs_source_read_bytes_total); counters get
// _total, list items become labels (tierfs_tiers_used{tier="ram",...}), the
// read latency a histogram in seconds, and words (version, modes) labels of
// tierfs_info. Notes are left out. The same walk makes .tierfs/stats, so the
// two cannot disagree. No FUSE include.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tiering/base/counter_visitor.h"

namespace tierfs {

class PrometheusCounterWriter final : public CounterVisitor {
 public:
  // The exposition text, tierfs_info last.
  std::string Finish();

  void Counter(std::string_view name, uint64_t value) override;
  void Gauge(std::string_view name, double value) override;
  void Flag(std::string_view name, bool value) override;
  void Text(std::string_view name, std::string_view value) override;
  void Note(std::string_view, std::string_view) override {}
  void Histogram(std::string_view name, const LatencyHistogram& h) override;
  void BeginGroup(std::string_view name) override { path_.emplace_back(name); }
  void EndGroup() override { path_.pop_back(); }
  void BeginList(std::string_view name, std::string_view item_label) override;
  void BeginItem(const Labels& labels) override;
  void EndItem() override { labels_.clear(); }
  void EndList() override;

 private:
  // tierfs_<path>_<name>, every character Prometheus does not allow as '_'.
  std::string Full(std::string_view name) const;
  void Sample(std::string_view name, double value, bool counter);

  std::vector<std::string> path_;
  std::string item_label_;                   // the open list's name label
  std::string labels_;                       // the open item's labels, rendered
  std::string info_;                         // tierfs_info's labels
  std::vector<std::string> families_;        // in the order first seen
  std::map<std::string, std::string> text_;  // family -> its lines
};

}  // namespace tierfs
