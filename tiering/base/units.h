// Byte sizes as people write them on a command line: the one size parser of
// tierfs, used by the mount options (ram=, tier=PATH:SIZE, ...), pfs-sim's
// max_request and the benchmark's --block. Counts as people read them: the
// one "1 file" / "1,234 files" of the messages, and lines of text wrapped for
// a terminal of 100 columns. No FUSE, no exceptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tierfs {

// What ParseByteSize accepts, for error messages.
inline constexpr std::string_view kByteSizeSyntax = "a number with an optional K, M, G or T suffix";

// Parses "512", "64K", "3M", "8G", "2T", "1.5G", "0.5K" into bytes. Units
// are binary (K = 2^10) and case-insensitive; a unit may be followed by "B"
// or "iB" ("8GB", "8GiB"). A fraction of a byte is truncated ("0.3K" = 307).
// Returns nullopt for anything else: empty text, spaces, a sign, hex, inf,
// nan, a bare "B", an unknown unit, or 1.8e19 bytes (about 2^64) and more.
std::optional<uint64_t> ParseByteSize(std::string_view text);

// 1234567 -> "1,234,567".
std::string Grouped(uint64_t n);

// `n` grouped and the noun `one` in the number it takes: (1, "file") ->
// "1 file", (1234, "file") -> "1,234 files", (2, "entry") -> "2 entries"
// (a consonant's y becomes ies; other nouns take s).
std::string Counted(uint64_t n, std::string_view one);

// `text` cut at spaces into lines of at most `width` characters (a word
// longer than that alone on its line), never between a number and the word
// after it, its unit or noun ("1.5 MiB", "3 directories"). Further lines are
// not indented: callers do.
std::vector<std::string> WrapWords(std::string_view text, size_t width);

}  // namespace tierfs
