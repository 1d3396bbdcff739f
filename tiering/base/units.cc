#include "tiering/base/units.h"

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

}  // namespace tierfs
