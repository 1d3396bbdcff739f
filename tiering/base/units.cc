#include "tiering/base/units.h"

#include <cctype>
#include <charconv>
#include <cmath>

namespace tierfs {
namespace {

// Sizes from here on are refused: just below 2^64 (1.845e19), so that every
// accepted double converts to uint64_t without overflow.
constexpr double kByteSizeLimit = 1.8e19;

// The multiplier of a unit letter, or 0 if `c` is not one.
uint64_t UnitOf(char c) {
  switch (c) {
    case 'k':
    case 'K':
      return 1ull << 10;
    case 'm':
    case 'M':
      return 1ull << 20;
    case 'g':
    case 'G':
      return 1ull << 30;
    case 't':
    case 'T':
      return 1ull << 40;
    default:
      return 0;
  }
}

// Whether `word` is a number ("1,234", "(1.5", "0"): the word after it (its
// unit or noun) stays on its line.
bool IsNumber(std::string_view word) {
  if (!word.empty() && word.front() == '(') word.remove_prefix(1);
  if (word.empty() || !std::isdigit(static_cast<unsigned char>(word.back()))) return false;
  return word.find_first_not_of("0123456789,.") == std::string_view::npos;
}

}  // namespace

std::optional<uint64_t> ParseByteSize(std::string_view text) {
  const char* const end = text.data() + text.size();
  double number = 0;
  auto [rest, ec] = std::from_chars(text.data(), end, number);
  if (ec != std::errc() || !std::isfinite(number) || number < 0) return std::nullopt;
  uint64_t unit = 1;
  if (rest != end) {
    unit = UnitOf(*rest++);
    if (unit == 0) return std::nullopt;
    if (rest != end && *rest == 'i') ++rest;  // 8GiB
    if (rest != end && (*rest == 'B' || *rest == 'b')) ++rest;
    if (rest != end) return std::nullopt;
  }
  const double bytes = number * static_cast<double>(unit);
  if (bytes >= kByteSizeLimit) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::string Grouped(uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string Counted(uint64_t n, std::string_view one) {
  std::string s = Grouped(n) + " ";
  if (n == 1 || one.empty()) return s.append(one);
  const bool ies = one.size() >= 2 && one.back() == 'y' &&
                   std::string_view("aeiou").find(one[one.size() - 2]) == std::string_view::npos;
  return ies ? s.append(one.substr(0, one.size() - 1)).append("ies") : s.append(one).append("s");
}

std::vector<std::string> WrapWords(std::string_view text, size_t width) {
  // Words, a number and its unit as one.
  std::vector<std::string> words;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    const bool glued = !words.empty() && IsNumber(words.back()) && !word.empty();
    if (glued) {
      words.back().append(" ").append(word);
    } else {
      words.emplace_back(word);
    }
    start = end + 1;
  }
  std::vector<std::string> lines(1);
  for (const std::string& word : words) {
    if (!lines.back().empty() && lines.back().size() + 1 + word.size() > width)
      lines.emplace_back();
    if (!lines.back().empty()) lines.back() += ' ';
    lines.back() += word;
  }
  return lines;
}

}  // namespace tierfs
