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

#include "tiering/latency_histogram.h"

namespace tierfs {
namespace {

// A parsed JSON value (just enough for our own stats).
struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kObject, kArray } kind = kNull;
  double number = 0;
  std::string text;
  std::vector<std::pair<std::string, Json>> members;  // object, in order
  std::vector<Json> items;                            // array
  const Json* Find(std::string_view key) const {
    for (const auto& [k, v] : members) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}
  bool Parse(Json* out) {
    if (!Value(out, 0)) return false;
    Skip();
    return i_ == s_.size();
  }

 private:
  void Skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  bool Eat(char c) {
    Skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool String(std::string* out) {
    if (!Eat('"')) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) return false;
        char e = s_[i_++];
        if (e == 'u') {  // our JSON escapes only control characters this way
          if (i_ + 4 > s_.size()) return false;
          *out +=
              static_cast<char>(std::strtol(std::string(s_.substr(i_, 4)).c_str(), nullptr, 16));
          i_ += 4;
        } else {
          *out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        }
      } else {
        *out += c;
      }
    }
    return Eat('"');
  }
  bool Value(Json* out, int depth) {
    if (depth > 32) return false;
    Skip();
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      out->kind = Json::kObject;
      if (Eat('}')) return true;
      do {
        std::string key;
        Json v;
        if (!String(&key) || !Eat(':') || !Value(&v, depth + 1)) return false;
        out->members.emplace_back(std::move(key), std::move(v));
      } while (Eat(','));
      return Eat('}');
    }
    if (c == '[') {
      ++i_;
      out->kind = Json::kArray;
      if (Eat(']')) return true;
      do {
        Json v;
        if (!Value(&v, depth + 1)) return false;
        out->items.push_back(std::move(v));
      } while (Eat(','));
      return Eat(']');
    }
    if (c == '"') {
      out->kind = Json::kString;
      return String(&out->text);
    }
    for (auto [word, kind, value] :
         {std::tuple{"true", Json::kBool, 1.0}, std::tuple{"false", Json::kBool, 0.0},
          std::tuple{"null", Json::kNull, 0.0}}) {
      if (s_.substr(i_, std::string_view(word).size()) == word) {
        i_ += std::string_view(word).size();
        out->kind = kind;
        out->number = value;
        return true;
      }
    }
    char* end = nullptr;
    std::string copy(s_.substr(i_, std::min<size_t>(64, s_.size() - i_)));
    out->number = std::strtod(copy.c_str(), &end);
    size_t used = static_cast<size_t>(end - copy.c_str());
    if (used == 0) return false;
    i_ += used;
    out->kind = Json::kNumber;
    return true;
  }
  std::string_view s_;
  size_t i_ = 0;
};

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

void Histogram(const std::string& name, const Json& h, Writer* w) {
  const Json* bounds = h.Find("bounds_us");
  const Json* cumulative = h.Find("cumulative");
  const Json* count = h.Find("count");
  const Json* sum = h.Find("sum_us");
  if (!bounds || !cumulative || !count || !sum || bounds->items.size() != cumulative->items.size())
    return;
  std::string full = name + "_seconds";
  std::string text =
      fmt::format("# HELP {} tierfs read latency\n# TYPE {} histogram\n", full, full);
  for (size_t i = 0; i < bounds->items.size(); ++i) {
    text += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", full, bounds->items[i].number / 1e6,
                        Number(cumulative->items[i].number));
  }
  text += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", full, Number(count->number));
  text +=
      fmt::format("{}_sum {}\n{}_count {}\n", full, sum->number / 1e6, full, Number(count->number));
  w->Raw(full, text);
}

void Walk(const std::string& prefix, const std::string& key, const std::string& labels,
          const Json& v, Writer* w, std::string* info) {
  std::string name = prefix + "_" + Sanitize(key);
  switch (v.kind) {
    case Json::kNumber:
    case Json::kBool:
      w->Sample(name, labels, v.number, GaugeNames().count(key) > 0);
      break;
    case Json::kString:
      if (labels.empty() && key != "last") {
        *info += fmt::format("{}{}=\"{}\"", info->empty() ? "" : ",", Sanitize(name.substr(7)),
                             LabelValue(v.text));
      }
      break;
    case Json::kObject:
      if (v.Find("bounds_us")) {
        Histogram(name, v, w);
        break;
      }
      for (const auto& [k, m] : v.members) Walk(name, k, labels, m, w, info);
      break;
    case Json::kArray:
      for (const Json& item : v.items) {  // e.g. tiers: one label set per named item
        const Json* item_name = item.Find("name");
        if (item.kind != Json::kObject || !item_name) continue;
        std::string l = fmt::format("tier=\"{}\"", LabelValue(item_name->text));
        for (const char* extra : {"kind", "path"}) {
          if (const Json* e = item.Find(extra))
            l += fmt::format(",{}=\"{}\"", extra, LabelValue(e->text));
        }
        for (const auto& [k, m] : item.members) {
          if (m.kind == Json::kNumber || m.kind == Json::kBool) Walk(name, k, l, m, w, info);
        }
      }
      break;
    case Json::kNull:
      break;
  }
}

}  // namespace

std::string PrometheusFromStatsJson(std::string_view json, std::string* error) {
  Json root;
  if (!Parser(json).Parse(&root) || root.kind != Json::kObject) {
    *error = "the stats are not a JSON object";
    return "";
  }
  Writer w;
  std::string info;
  for (const auto& [k, v] : root.members) Walk("tierfs", k, "", v, &w, &info);
  std::string text = w.Text();
  text += fmt::format(
      "# HELP tierfs_info tierfs version and modes\n# TYPE tierfs_info gauge\n"
      "tierfs_info{{{}}} 1\n",
      info);
  return text;
}

}  // namespace tierfs
