// CounterVisitor: how every component reports its figures (CacheLib navy's
// getCounters). A component walks its counters into a visitor; the
// .tierfs/stats JSON and the Prometheus text are two visitors of the same
// walk, so a figure is defined once and appears in both.
//
// Names are short keys ("read_bytes"); the groups and lists opened around
// them give the full path (source.read_bytes -> tierfs_source_read_bytes_total).
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "tiering/base/latency_histogram.h"

namespace tierfs {

using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

class CounterVisitor {
 public:
  virtual ~CounterVisitor() = default;
  // A figure that only goes up (a Prometheus counter).
  virtual void Counter(std::string_view name, uint64_t value) = 0;
  // A figure that goes up and down, or a setting (a Prometheus gauge).
  virtual void Gauge(std::string_view name, double value) = 0;
  // A yes/no setting (JSON true/false, a 0/1 gauge).
  virtual void Flag(std::string_view name, bool value) = 0;
  // A word naming a setting or state ("first-fit", "order"): a label of
  // tierfs_info in Prometheus.
  virtual void Text(std::string_view name, std::string_view value) = 0;
  // Free text for people (the last tuning decision): JSON only.
  virtual void Note(std::string_view name, std::string_view value) = 0;
  virtual void Histogram(std::string_view name, const LatencyHistogram& h) = 0;
  // Groups nest: everything until the matching EndGroup is inside `name`.
  virtual void BeginGroup(std::string_view name) = 0;
  virtual void EndGroup() = 0;
  // A list of like items (the tiers), each told apart by its labels. The
  // first label is the item's name: "name" in JSON, `item_label` in
  // Prometheus (tiers: tier="ram").
  virtual void BeginList(std::string_view name, std::string_view item_label) = 0;
  virtual void BeginItem(const Labels& labels) = 0;
  virtual void EndItem() = 0;
  virtual void EndList() = 0;
};

}  // namespace tierfs
