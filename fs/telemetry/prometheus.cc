#include "fs/telemetry/prometheus.h"

#include <fmt/format.h>

#include <cctype>

#include "fs/telemetry/counter_json.h"

namespace tierfs {
namespace {

std::string Sanitize(std::string_view s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// A label value (`quoted`: '"' escaped too) or a HELP text, escaped.
std::string Escape(std::string_view s, bool quoted) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || (quoted && c == '"')) out += '\\';
    out += c;
  }
  return out;
}

std::string LabelValue(std::string_view s) { return Escape(s, true); }

// How a unit is written in a key (stripped) and in a Prometheus name, and
// the factor to its base unit.
struct UnitRule {
  std::vector<std::string_view> key_suffixes;
  std::string_view suffix;
  double scale;
};

UnitRule RuleFor(Unit unit) {
  switch (unit) {
    case Unit::kBytes:
      return {{"_bytes"}, "_bytes", 1};
    case Unit::kSeconds:
      return {{"_seconds"}, "_seconds", 1};
    case Unit::kMilliseconds:
      return {{"_ms"}, "_seconds", 1e-3};
    case Unit::kMicroseconds:
      return {{"_us"}, "_seconds", 1e-6};
    case Unit::kBytesPerSecond:
      return {{"_bytes_per_s", "_bytes_per_second"}, "_bytes_per_second", 1};
    case Unit::kFiles:
      return {{"_files"}, "_files", 1};
    case Unit::kChunks:
      return {{"_chunks"}, "_chunks", 1};
    case Unit::kEntries:
      return {{"_entries"}, "_entries", 1};
    case Unit::kPromotions:
      return {{"_promotions"}, "_promotions", 1};
    case Unit::kParts:
      return {{"_parts"}, "_parts", 1};
    case Unit::kNone:
      break;
  }
  return {{}, "", 1};
}

// The key without its unit: "read_bytes" -> "read", "bytes" -> "".
std::string_view Stem(std::string_view key, const UnitRule& rule) {
  for (std::string_view s : rule.key_suffixes) {
    if (key == s.substr(1)) return {};
    if (key.size() > s.size() && key.substr(key.size() - s.size()) == s) {
      return key.substr(0, key.size() - s.size());
    }
  }
  return key;
}

}  // namespace

std::string PrometheusCounterWriter::Name(std::string_view name, const About& about) const {
  const UnitRule rule = RuleFor(about.unit);
  std::string full = "tierfs";
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict, PR 105651)
  // on "literal" + std::string at -O3.
  for (const auto& p : path_) {
    full += '_';
    full += Sanitize(p);
  }
  const std::string_view stem = about.metric.empty() ? Stem(name, rule) : about.metric;
  if (!stem.empty()) {
    full += '_';
    full += Sanitize(stem);
  }
  full += rule.suffix;
  return full;
}

PrometheusCounterWriter::Family& PrometheusCounterWriter::Add(const std::string& name,
                                                              const About& about,
                                                              std::string_view type) {
  auto [it, added] = family_.try_emplace(name);
  if (added) {
    order_.push_back(name);
    it->second.help = Escape(about.help, false);
    it->second.type = type;
  }
  return it->second;
}

void PrometheusCounterWriter::Sample(std::string_view name, double value, const About& about,
                                     bool counter) {
  if (about.unit == Unit::kBytesPerSecond) return;  // rate() of a counter, by convention
  std::string family = Name(name, about);
  if (counter) family += "_total";
  value *= RuleFor(about.unit).scale;
  auto& samples = Add(family, about, counter ? "counter" : "gauge").samples;
  for (auto& [labels, sum] : samples) {
    if (labels == labels_) {  // another item of the same series
      sum += value;
      return;
    }
  }
  samples.emplace_back(labels_, value);
}

void PrometheusCounterWriter::Counter(std::string_view name, uint64_t value, const About& about) {
  Sample(name, static_cast<double>(value), about, true);
}

void PrometheusCounterWriter::Gauge(std::string_view name, double value, const About& about) {
  Sample(name, value, about, false);
}

void PrometheusCounterWriter::Flag(std::string_view name, bool value, const About& about) {
  Sample(name, value ? 1 : 0, about, false);
}

void PrometheusCounterWriter::Text(std::string_view, std::string_view value,
                                   std::string_view label) {
  if (!labels_.empty()) return;  // an item's words are its labels already
  info_ += fmt::format("{}{}=\"{}\"", info_.empty() ? "" : ",", Sanitize(label), LabelValue(value));
}

void PrometheusCounterWriter::Histogram(std::string_view name, const LatencyHistogram& h,
                                        const About& about) {
  const std::string family = Name(name, About{about.help, Unit::kSeconds, about.metric});
  std::string& text = Add(family, about, "histogram").lines;
  text.clear();  // one histogram per name, not per list item
  for (size_t i = 0; i < LatencyHistogram::kBoundsUs.size(); ++i) {
    text += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", family,
                        static_cast<double>(LatencyHistogram::kBoundsUs[i]) / 1e6,
                        h.CumulativeCount(i));
  }
  text += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", family, h.count());
  text += fmt::format("{}_sum {}\n{}_count {}\n", family, static_cast<double>(h.sum_us()) / 1e6,
                      family, h.count());
}

void PrometheusCounterWriter::BeginList(std::string_view name, std::string_view item_label) {
  path_.emplace_back(name);
  item_label_ = Sanitize(item_label);
}

void PrometheusCounterWriter::BeginItem(const Labels& labels, std::string_view series) {
  labels_ = fmt::format("{}=\"{}\"", item_label_, LabelValue(series));
  for (size_t i = 1; i < labels.size(); ++i) {
    labels_ += fmt::format(",{}=\"{}\"", Sanitize(labels[i].first), LabelValue(labels[i].second));
  }
}

void PrometheusCounterWriter::EndList() {
  path_.pop_back();
  item_label_.clear();
}

std::string PrometheusCounterWriter::Finish() {
  std::string all;
  for (const auto& name : order_) {
    const Family& f = family_[name];
    all += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, f.help, name, f.type);
    for (const auto& [labels, value] : f.samples) {
      all += fmt::format("{}{} {}\n", name, labels.empty() ? "" : "{" + labels + "}",
                         JsonNumber(value));
    }
    all += f.lines;
  }
  all += fmt::format(
      "# HELP tierfs_info The tierfs version, the SOURCE and mount point it serves and its "
      "modes, as labels; always 1.\n# TYPE tierfs_info gauge\ntierfs_info{{{}}} 1\n",
      info_);
  return all;
}

}  // namespace tierfs
