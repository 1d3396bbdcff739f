#include "fs/telemetry/counter_json.h"

#include <fmt/format.h>

#include <cmath>

#include "tiering/base/json_string.h"

namespace tierfs {

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  // Six significant digits: a latency of 140.035 ms, not 140.03527659574468.
  return fmt::format("{:.6g}", v);
}

JsonCounterWriter::JsonCounterWriter() : out_("{"), first_{true} {}

std::string JsonCounterWriter::Finish() {
  out_ += "\n}\n";
  return std::move(out_);
}

void JsonCounterWriter::Key(std::string_view name) {
  if (!first_.back()) out_ += ',';
  first_.back() = false;
  // One top-level member or tier per line; the rest inline.
  if (first_.size() <= 2) {
    out_ += '\n';
    out_.append(2 * first_.size(), ' ');
  } else {
    out_ += ' ';
  }
  if (!name.empty()) out_ += JsonString(name) + ": ";
}

void JsonCounterWriter::Open(char bracket) {
  out_ += bracket;
  first_.push_back(true);
}

void JsonCounterWriter::Close(char bracket) {
  first_.pop_back();
  out_ += bracket;
}

void JsonCounterWriter::Counter(std::string_view name, uint64_t value, const About&) {
  Key(name);
  out_ += fmt::format("{}", value);
}

void JsonCounterWriter::Gauge(std::string_view name, double value, const About&) {
  Key(name);
  out_ += JsonNumber(value);
}

void JsonCounterWriter::Flag(std::string_view name, bool value, const About&) {
  Key(name);
  out_ += value ? "true" : "false";
}

void JsonCounterWriter::Text(std::string_view name, std::string_view value, std::string_view) {
  Key(name);
  out_ += JsonString(value);
}

void JsonCounterWriter::Note(std::string_view name, std::string_view value) {
  Text(name, value, {});
}

void JsonCounterWriter::Histogram(std::string_view name, const LatencyHistogram& h, const About&) {
  Key(name);
  out_ += h.Json();
}

void JsonCounterWriter::BeginGroup(std::string_view name) {
  Key(name);
  Open('{');
}

void JsonCounterWriter::EndGroup() { Close('}'); }

void JsonCounterWriter::BeginList(std::string_view name, std::string_view) {
  Key(name);
  Open('[');
}

void JsonCounterWriter::BeginItem(const Labels& labels, std::string_view) {
  Key("");
  Open('{');
  for (size_t i = 0; i < labels.size(); ++i)
    Text(i == 0 ? "name" : labels[i].first, labels[i].second, {});
}

void JsonCounterWriter::EndItem() { Close('}'); }

void JsonCounterWriter::EndList() { Close(']'); }

}  // namespace tierfs
