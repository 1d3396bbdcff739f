#include "fs/prometheus.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "tiering/json/json_value.h"

namespace tierfs {
namespace {

// Figures that go up and down; every other number is a counter.
const std::set<std::string>& GaugeNames() {
  static const std::set<std::string> names = {"uptime_seconds",
                                              "files",
                                              "directories",
                                              "symlinks",
                                              "skipped",
                                              "file_bytes",
                                              "memory_bytes",
                                              "budget",
                                              "limit",
                                              "used",
                                              "chunks",
                                              "open",
                                              "capacity",
                                              "chunk_size",
                                              "threads",
                                              "queued_foreground",
                                              "queued_lookahead",
                                              "queued_background",
                                              "running",
                                              "files_resident",
                                              "declared",
                                              "position",
                                              "lookahead",
                                              "lead",
                                              "requested_files",
                                              "requested_bytes",
                                              "done_files",
                                              "done_bytes",
                                              "failed_files",
                                              "queued_files",
                                              "rate_bytes_per_s",
                                              "eta_seconds",
                                              "parallelism",
                                              "tune_parallelism",
                                              "tune_lookahead"};
  return names;
}

std::string Sanitize(std::string_view s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

std::string LabelValue(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  return fmt::format("{}", v);
}

class Writer {
 public:
  void Sample(const std::string& name, const std::string& labels, double value, bool gauge) {
    std::string full = gauge ? name : name + "_total";
    if (declared_.insert(full).second) {
      families_.push_back(full);
      out_[full] = fmt::format("# HELP {} tierfs .tierfs/stats {}\n# TYPE {} {}\n", full,
                               name.substr(7), full, gauge ? "gauge" : "counter");
    }
    out_[full] +=
        fmt::format("{}{} {}\n", full, labels.empty() ? "" : "{" + labels + "}", Number(value));
  }
  void Raw(const std::string& family, const std::string& text) {
    families_.push_back(family);
    out_[family] = text;
  }
  std::string Text() const {
    std::string all;
    for (const auto& f : families_) all += out_.at(f);
    return all;
  }

 private:
  std::set<std::string> declared_;
  std::vector<std::string> families_;
  std::map<std::string, std::string> out_;
};

void Histogram(const std::string& name, const JsonValue& h, Writer* w) {
  const JsonValue* bounds = h.Member("bounds_us");
  const JsonValue* cumulative = h.Member("cumulative");
  const JsonValue* count = h.Member("count");
  const JsonValue* sum = h.Member("sum_us");
  if (!bounds || !cumulative || !count || !sum ||
      bounds->items().size() != cumulative->items().size()) {
    return;
  }
  std::string full = name + "_seconds";
  std::string text =
      fmt::format("# HELP {} tierfs read latency\n# TYPE {} histogram\n", full, full);
  for (size_t i = 0; i < bounds->items().size(); ++i) {
    text += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", full, bounds->items()[i].number() / 1e6,
                        Number(cumulative->items()[i].number()));
  }
  text += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", full, Number(count->number()));
  text += fmt::format("{}_sum {}\n{}_count {}\n", full, sum->number() / 1e6, full,
                      Number(count->number()));
  w->Raw(full, text);
}

double Value(const JsonValue& v) {
  return v.type() == JsonValue::Type::kBool ? (v.boolean() ? 1 : 0) : v.number();
}

bool IsScalar(const JsonValue& v) {
  return v.type() == JsonValue::Type::kNumber || v.type() == JsonValue::Type::kBool;
}

void Walk(const std::string& prefix, const std::string& key, const std::string& labels,
          const JsonValue& v, Writer* w, std::string* info) {
  std::string name = prefix + "_" + Sanitize(key);
  if (IsScalar(v)) {
    w->Sample(name, labels, Value(v), GaugeNames().count(key) > 0);
  } else if (v.is_string()) {
    if (labels.empty() && key != "last") {
      *info += fmt::format("{}{}=\"{}\"", info->empty() ? "" : ",", Sanitize(name.substr(7)),
                           LabelValue(v.string()));
    }
  } else if (v.is_object()) {
    if (v.Member("bounds_us")) return Histogram(name, v, w);
    for (const auto& [k, m] : v.members()) Walk(name, k, labels, m, w, info);
  } else if (v.is_array()) {
    for (const JsonValue& item : v.items()) {  // e.g. tiers: one label set per named item
      const JsonValue* item_name = item.Member("name");
      if (!item_name) continue;
      std::string l = fmt::format("tier=\"{}\"", LabelValue(item_name->string()));
      for (const char* extra : {"kind", "path"}) {
        if (const JsonValue* e = item.Member(extra)) {
          l += fmt::format(",{}=\"{}\"", extra, LabelValue(e->string()));
        }
      }
      for (const auto& [k, m] : item.members()) {
        if (IsScalar(m)) Walk(name, k, l, m, w, info);
      }
    }
  }
}

}  // namespace

std::string PrometheusFromStatsJson(std::string_view json, std::string* error) {
  std::optional<JsonValue> root = ParseJson(json, error);
  if (!root) return "";
  if (!root->is_object()) {
    *error = "the stats are not a JSON object";
    return "";
  }
  Writer w;
  std::string info;
  for (const auto& [k, v] : root->members()) Walk("tierfs", k, "", v, &w, &info);
  std::string text = w.Text();
  text += fmt::format(
      "# HELP tierfs_info tierfs version and modes\n# TYPE tierfs_info gauge\n"
      "tierfs_info{{{}}} 1\n",
      info);
  return text;
}

}  // namespace tierfs
