// JsonValue: a small read-only JSON document, enough for the subcommands to
// read `.tierfs/stats` without a JSON library. Parsing is strict (RFC 8259,
// one value, nesting at most kMaxDepth) and never throws; lookups by a dotted
// path ("prefetch.stage.done_files") return nullptr or a fallback when a field
// is absent or of another type, so an older daemon's stats read as "missing",
// never as an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tiering/base/status.h"

namespace tierfs {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  static constexpr int kMaxDepth = 64;

  Type type() const { return type_; }
  bool is_object() const { return type_ == Type::kObject; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }

  // The member `key` of an object (nullptr if absent or not an object).
  const JsonValue* Member(std::string_view key) const;
  // Follows a dotted path of object keys from this value; nullptr if any step is missing.
  const JsonValue* Find(std::string_view dotted_path) const;

  // The number at `dotted_path` as an unsigned integer (negative numbers and
  // fractions are truncated toward 0 and clamped), or `fallback`.
  uint64_t Uint(std::string_view dotted_path, uint64_t fallback = 0) const;
  double Number(std::string_view dotted_path, double fallback = 0) const;
  std::string String(std::string_view dotted_path, std::string fallback = "") const;

  // This value itself.
  double number() const { return number_; }
  const std::string& string() const { return string_; }
  bool boolean() const { return boolean_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  bool boolean_ = false;
  double number_ = 0;
  uint64_t uint_ = 0;  // exact value of a non-negative integer literal that fits
  bool exact_uint_ = false;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

// Parses `text` as one JSON value. Fails (EINVAL) with what is wrong and at
// which byte offset.
Result<JsonValue> ParseJson(std::string_view text);

}  // namespace tierfs
