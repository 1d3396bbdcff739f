// PrometheusCounterWriter: the counters walk written in the Prometheus text
// exposition format, by Prometheus's naming rules. A figure is named after
// its path and its unit (About): source.read_bytes ->
// tierfs_source_read_bytes_total, autotune.source_latency_ms (milliseconds)
// -> tierfs_prefetch_autotune_source_latency_seconds in seconds, tiers.used
// (bytes) -> tierfs_tiers_used_bytes. Counters get _total, list items become
// labels (tierfs_tiers_used_bytes{tier="ram",...}; items of one series are
// added up), histograms are in seconds, each family's HELP is its About's
// sentence, and words (version, SOURCE, mount point, modes) are labels of
// tierfs_info. Notes and precomputed rates (bytes per second) are left
// out: Prometheus computes rates from counters. The same walk makes
// .tierfs/stats, so the two cannot disagree. No FUSE include.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tiering/base/counter_visitor.h"

namespace tierfs {

class PrometheusCounterWriter final : public CounterVisitor {
 public:
  // The exposition text, tierfs_info last.
  std::string Finish();

  void Counter(std::string_view name, uint64_t value, const About& about) override;
  void Gauge(std::string_view name, double value, const About& about) override;
  void Flag(std::string_view name, bool value, const About& about) override;
  void Text(std::string_view name, std::string_view value, std::string_view label) override;
  void Note(std::string_view, std::string_view) override {}
  void Histogram(std::string_view name, const LatencyHistogram& h, const About& about) override;
  void BeginGroup(std::string_view name) override { path_.emplace_back(name); }
  void EndGroup() override { path_.pop_back(); }
  void BeginList(std::string_view name, std::string_view item_label) override;
  using CounterVisitor::BeginItem;
  void BeginItem(const Labels& labels, std::string_view series) override;
  void EndItem() override { labels_.clear(); }
  void EndList() override;

 private:
  struct Family {
    std::string help;
    std::string_view type;
    std::vector<std::pair<std::string, double>> samples;  // rendered labels -> value
    std::string lines;                                    // a histogram's, rendered
  };
  // tierfs_<path>_<stem>_<unit>: every character Prometheus does not allow
  // as '_', the key's unit suffix replaced by the base unit's.
  std::string Name(std::string_view name, const About& about) const;
  Family& Add(const std::string& name, const About& about, std::string_view type);
  void Sample(std::string_view name, double value, const About& about, bool counter);

  std::vector<std::string> path_;
  std::string item_label_;                // the open list's name label
  std::string labels_;                    // the open item's labels, rendered
  std::string info_;                      // tierfs_info's labels
  std::vector<std::string> order_;        // families in the order first seen
  std::map<std::string, Family> family_;  // by name
};

}  // namespace tierfs
