// JsonCounterWriter: the counters walk written as the JSON of .tierfs/stats.
// Groups become objects, lists arrays of objects whose labels are string
// members, counters and gauges numbers, flags booleans. Keys and values are
// the components' own: the About of a figure is for Prometheus.
#pragma once

#include <string>
#include <vector>

#include "tiering/base/counter_visitor.h"

namespace tierfs {

class JsonCounterWriter final : public CounterVisitor {
 public:
  JsonCounterWriter();
  // The document, once every group and list opened has been closed.
  std::string Finish();

  void Counter(std::string_view name, uint64_t value, const About&) override;
  void Gauge(std::string_view name, double value, const About&) override;
  void Flag(std::string_view name, bool value, const About&) override;
  void Text(std::string_view name, std::string_view value, std::string_view) override;
  void Note(std::string_view name, std::string_view value) override;
  void Histogram(std::string_view name, const LatencyHistogram& h, const About&) override;
  void BeginGroup(std::string_view name) override;
  void EndGroup() override;
  void BeginList(std::string_view name, std::string_view item_label) override;
  using CounterVisitor::BeginItem;
  void BeginItem(const Labels& labels, std::string_view) override;
  void EndItem() override;
  void EndList() override;

 private:
  void Key(std::string_view name);
  void Open(char bracket);
  void Close(char bracket);

  std::string out_;
  std::vector<bool> first_;  // per open object or array: nothing written in it yet
};

// A JSON number: integers without a fraction, others in their shortest form.
std::string JsonNumber(double v);

}  // namespace tierfs
