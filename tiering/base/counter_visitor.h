// CounterVisitor: how every component reports its figures (CacheLib navy's
// getCounters). A component walks its counters into a visitor; the
// .tierfs/stats JSON and the Prometheus text are two visitors of the same
// walk, so a figure is defined once and appears in both.
//
// Names are short keys ("read_bytes"); the groups and lists opened around
// them give the full path (source.read_bytes -> tierfs_source_read_bytes_total).
// Each figure says what it measures and in which unit (About), where it is
// defined: the JSON keeps the key and the value as they are, Prometheus
// takes the sentence as HELP and names and scales by the unit (a key
// "latency_ms" in milliseconds becomes ..._latency_seconds in seconds).
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "tiering/base/latency_histogram.h"

namespace tierfs {

using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

// The unit of a figure's value as the component reports it. A count of
// things names what it counts (Prometheus: the noun ends the name,
// tierfs_prefetch_order_lookahead_files), unless its key already does
// ("directories", "threads") or it counts events (a counter's _total).
enum class Unit {
  kNone,  // a count of events, a ratio, a setting, or a key that ends in its noun
  kBytes,
  kSeconds,
  kMilliseconds,    // Prometheus: converted to seconds
  kMicroseconds,    // Prometheus: converted to seconds
  kBytesPerSecond,  // a rate for people: JSON only (Prometheus takes rate() of a counter)
  kFiles,
  kChunks,
  kEntries,
  kPromotions,
  kParts,  // parts of reads: a read's bytes within one chunk (most reads are one part)
};

// What a figure measures.
struct About {
  // One sentence for people: what is measured (Prometheus's HELP).
  std::string_view help;
  Unit unit = Unit::kNone;
  // Prometheus's name when the key's would put the unit in the middle
  // (bytes_served -> "served", named served_bytes): without the unit, which
  // is appended. Empty: the key without its unit suffix.
  std::string_view metric = {};
};

class CounterVisitor {
 public:
  virtual ~CounterVisitor() = default;
  // A figure that only goes up (a Prometheus counter).
  virtual void Counter(std::string_view name, uint64_t value, const About& about) = 0;
  // A figure that goes up and down, or a setting (a Prometheus gauge).
  virtual void Gauge(std::string_view name, double value, const About& about) = 0;
  // A yes/no setting (JSON true/false, a 0/1 gauge).
  virtual void Flag(std::string_view name, bool value, const About& about) = 0;
  // A word naming a setting or state ("first-fit", "order"): in Prometheus
  // the label `label` of tierfs_info.
  virtual void Text(std::string_view name, std::string_view value, std::string_view label) = 0;
  // Free text for people (the last tuning decision, an error): JSON only.
  virtual void Note(std::string_view name, std::string_view value) = 0;
  // Durations in microseconds; a histogram in seconds in Prometheus.
  virtual void Histogram(std::string_view name, const LatencyHistogram& h, const About& about) = 0;
  // Groups nest: everything until the matching EndGroup is inside `name`.
  virtual void BeginGroup(std::string_view name) = 0;
  virtual void EndGroup() = 0;
  // A list of like items (the tiers), each told apart by its labels. The
  // first label is the item's name: "name" in JSON, `item_label` in
  // Prometheus (tiers: tier="ram").
  virtual void BeginList(std::string_view name, std::string_view item_label) = 0;
  // `series`: the item's name in Prometheus, where the names are not a
  // bounded set (streams named after processes): items given the same
  // series are added up into one.
  virtual void BeginItem(const Labels& labels, std::string_view series) = 0;
  void BeginItem(const Labels& labels) { BeginItem(labels, labels.at(0).second); }
  virtual void EndItem() = 0;
  virtual void EndList() = 0;
};

}  // namespace tierfs
