#include "fs/prometheus.h"

#include <fmt/format.h>

#include <cctype>

#include "fs/counter_json.h"

namespace tierfs {
namespace {

std::string Sanitize(std::string_view s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

std::string LabelValue(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string PrometheusCounterWriter::Full(std::string_view name) const {
  std::string full = "tierfs";
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict, PR 105651)
  // on "literal" + std::string at -O3.
  for (const auto& p : path_) {
    full += '_';
    full += Sanitize(p);
  }
  full += '_';
  full += Sanitize(name);
  return full;
}

void PrometheusCounterWriter::Sample(std::string_view name, double value, bool counter) {
  const std::string base = Full(name);
  const std::string family = counter ? base + "_total" : base;
  auto [it, added] = text_.try_emplace(family);
  if (added) {
    families_.push_back(family);
    it->second = fmt::format("# HELP {} tierfs .tierfs/stats {}\n# TYPE {} {}\n", family,
                             base.substr(7), family, counter ? "counter" : "gauge");
  }
  it->second += fmt::format("{}{} {}\n", family, labels_.empty() ? "" : "{" + labels_ + "}",
                            JsonNumber(value));
}

void PrometheusCounterWriter::Counter(std::string_view name, uint64_t value) {
  Sample(name, static_cast<double>(value), true);
}

void PrometheusCounterWriter::Gauge(std::string_view name, double value) {
  Sample(name, value, false);
}

void PrometheusCounterWriter::Flag(std::string_view name, bool value) {
  Sample(name, value ? 1 : 0, false);
}

void PrometheusCounterWriter::Text(std::string_view name, std::string_view value) {
  if (!labels_.empty()) return;  // an item's words are its labels already
  info_ +=
      fmt::format("{}{}=\"{}\"", info_.empty() ? "" : ",", Full(name).substr(7), LabelValue(value));
}

void PrometheusCounterWriter::Histogram(std::string_view name, const LatencyHistogram& h) {
  const std::string family = Full(name) + "_seconds";
  std::string text =
      fmt::format("# HELP {} tierfs read latency\n# TYPE {} histogram\n", family, family);
  for (size_t i = 0; i < LatencyHistogram::kBoundsUs.size(); ++i) {
    text += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", family,
                        static_cast<double>(LatencyHistogram::kBoundsUs[i]) / 1e6,
                        h.CumulativeCount(i));
  }
  text += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", family, h.count());
  text += fmt::format("{}_sum {}\n{}_count {}\n", family, static_cast<double>(h.sum_us()) / 1e6,
                      family, h.count());
  families_.push_back(family);
  text_[family] = std::move(text);
}

void PrometheusCounterWriter::BeginList(std::string_view name, std::string_view item_label) {
  path_.emplace_back(name);
  item_label_ = Sanitize(item_label);
}

void PrometheusCounterWriter::BeginItem(const Labels& labels) {
  labels_.clear();
  for (size_t i = 0; i < labels.size(); ++i) {
    labels_ +=
        fmt::format("{}{}=\"{}\"", i ? "," : "", i == 0 ? item_label_ : Sanitize(labels[i].first),
                    LabelValue(labels[i].second));
  }
}

void PrometheusCounterWriter::EndList() {
  path_.pop_back();
  item_label_.clear();
}

std::string PrometheusCounterWriter::Finish() {
  std::string all;
  for (const auto& f : families_) all += text_[f];
  all += fmt::format(
      "# HELP tierfs_info tierfs version and modes\n# TYPE tierfs_info gauge\n"
      "tierfs_info{{{}}} 1\n",
      info_);
  return all;
}

}  // namespace tierfs
