#include "tiering/base/json_value.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace tierfs {

// A recursive-descent parser over one text. REQUIRES: text outlives it.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  Result<JsonValue> ParseDocument() {
    JsonValue v;
    SkipSpace();
    if (ParseValue(&v, 0)) {
      SkipSpace();
      if (pos_ == text_.size()) return v;
      Fail("unexpected text after the JSON value");
    }
    return Status::Error(EINVAL, fmt::format("{} at byte {}", error_, pos_));
  }

 private:
  bool Fail(const char* what) {
    if (error_.empty()) error_ = what;
    return false;
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\n' || Peek() == '\r' || Peek() == '\t')) {
      ++pos_;
    }
  }
  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return Fail("invalid literal");
    pos_ += word.size();
    return true;
  }

  bool ParseValue(JsonValue* v, int depth) {
    if (depth > JsonValue::kMaxDepth) return Fail("nesting too deep");
    switch (Peek()) {
      case '{':
        return ParseObject(v, depth);
      case '[':
        return ParseArray(v, depth);
      case '"':
        v->type_ = JsonValue::Type::kString;
        return ParseString(&v->string_);
      case 't':
        v->type_ = JsonValue::Type::kBool;
        v->boolean_ = true;
        return Literal("true");
      case 'f':
        v->type_ = JsonValue::Type::kBool;
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return ParseNumber(v);
    }
  }

  bool ParseObject(JsonValue* v, int depth) {
    v->type_ = JsonValue::Type::kObject;
    ++pos_;  // '{'
    SkipSpace();
    if (Peek() == '}') return ++pos_, true;
    for (;;) {
      SkipSpace();
      if (Peek() != '"') return Fail("expected a string key");
      std::pair<std::string, JsonValue> member;
      if (!ParseString(&member.first)) return false;
      SkipSpace();
      if (Peek() != ':') return Fail("expected ':'");
      ++pos_;
      SkipSpace();
      if (!ParseValue(&member.second, depth + 1)) return false;
      v->members_.push_back(std::move(member));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
      } else if (Peek() == '}') {
        return ++pos_, true;
      } else {
        return Fail("expected ',' or '}'");
      }
    }
  }

  bool ParseArray(JsonValue* v, int depth) {
    v->type_ = JsonValue::Type::kArray;
    ++pos_;  // '['
    SkipSpace();
    if (Peek() == ']') return ++pos_, true;
    for (;;) {
      SkipSpace();
      v->items_.emplace_back();
      if (!ParseValue(&v->items_.back(), depth + 1)) return false;
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
      } else if (Peek() == ']') {
        return ++pos_, true;
      } else {
        return Fail("expected ',' or ']'");
      }
    }
  }

  bool ParseHex4(uint32_t* out) {
    if (pos_ + 4 > text_.size()) return Fail("truncated \\u escape");
    *out = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      int d = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0) return Fail("bad hex digit in \\u escape");
      *out = *out * 16 + static_cast<uint32_t>(d);
    }
    return true;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool ParseString(std::string* out) {
    ++pos_;  // '"'
    for (;;) {
      if (AtEnd()) return Fail("unterminated string");
      char c = text_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return Fail("control character in string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (AtEnd()) return Fail("unterminated string");
      char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp;
          if (!ParseHex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && text_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            uint32_t low;
            if (!ParseHex4(&low)) return false;
            if (low < 0xDC00 || low >= 0xE000) return Fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Fail("bad escape in string");
      }
    }
  }

  bool ParseNumber(JsonValue* v) {
    size_t start = pos_;
    if (Peek() == '-') ++pos_;
    auto digits = [&] {
      size_t from = pos_;
      while (!AtEnd() && Peek() >= '0' && Peek() <= '9') ++pos_;
      return pos_ - from;
    };
    size_t int_digits = digits();
    if (int_digits == 0) return Fail("expected a value");
    if (int_digits > 1 && text_[pos_ - int_digits] == '0') return Fail("leading zero in number");
    bool integral = true;
    if (Peek() == '.') {
      ++pos_;
      integral = false;
      if (digits() == 0) return Fail("expected digits after '.'");
    }
    if (Peek() == 'e' || Peek() == 'E') {
      ++pos_;
      integral = false;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      if (digits() == 0) return Fail("expected digits in exponent");
    }
    std::string literal(text_.substr(start, pos_ - start));
    v->type_ = JsonValue::Type::kNumber;
    v->number_ = std::strtod(literal.c_str(), nullptr);
    if (integral && literal[0] != '-') {
      uint64_t u = 0;
      bool fits = true;
      for (char c : literal) {
        uint64_t d = static_cast<uint64_t>(c - '0');
        if (u > (std::numeric_limits<uint64_t>::max() - d) / 10) fits = false;
        u = u * 10 + d;
      }
      v->uint_ = u;
      v->exact_uint_ = fits;
    }
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string error_;
};

Result<JsonValue> ParseJson(std::string_view text) { return JsonParser(text).ParseDocument(); }

const JsonValue* JsonValue::Member(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (const auto& [name, value] : members_) {
    if (name == key) return &value;
  }
  return nullptr;
}

const JsonValue* JsonValue::Find(std::string_view dotted_path) const {
  const JsonValue* v = this;
  while (v && !dotted_path.empty()) {
    size_t dot = dotted_path.find('.');
    v = v->Member(dotted_path.substr(0, dot));
    dotted_path = dot == std::string_view::npos ? "" : dotted_path.substr(dot + 1);
  }
  return v;
}

uint64_t JsonValue::Uint(std::string_view dotted_path, uint64_t fallback) const {
  const JsonValue* v = Find(dotted_path);
  if (!v || !v->is_number()) return fallback;
  if (v->exact_uint_) return v->uint_;
  if (!(v->number_ > 0)) return 0;  // negative or NaN
  if (v->number_ >= 1.8e19) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(v->number_);
}

double JsonValue::Number(std::string_view dotted_path, double fallback) const {
  const JsonValue* v = Find(dotted_path);
  return v && v->is_number() ? v->number_ : fallback;
}

std::string JsonValue::String(std::string_view dotted_path, std::string fallback) const {
  const JsonValue* v = Find(dotted_path);
  return v && v->is_string() ? v->string_ : fallback;
}

}  // namespace tierfs
